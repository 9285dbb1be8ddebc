from neurips26.cli import main

raise SystemExit(main())
