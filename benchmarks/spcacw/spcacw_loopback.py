"""SP-CACW on Flower's Deployment Engine over loopback, compared with the in-process engine.

Starts one ``flower-superlink`` and three ``flower-supernode`` processes on 127.0.0.1 (free ports, a
throw-away ``FLWR_HOME``), submits the packaged Flower App ``src/neurips26/methods/spcacw/flwr_app`` with
``flwr run`` for a few rounds, then compares the ServerApp's per-round weights and final target model with
:func:`neurips26.methods.spcacw.flower_app.engine_reference` for the same seed. Exit status 0 when they
agree (weights within 1e-5, model within 1e-4), 1 otherwise.

Run: ``.venv/bin/python benchmarks/spcacw/spcacw_loopback.py [--rounds 5] [--keep DIR]``. Needs the ``flower``
extra. Every process it starts is stopped by its own id at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
APP = ROOT / "src" / "neurips26" / "methods" / "spcacw" / "flwr_app"
BIN = Path(sys.executable).parent


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_for_port(port: int, timeout: float) -> None:
    """Block until something accepts connections on 127.0.0.1:``port``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.2)
    raise TimeoutError(f"nothing listens on 127.0.0.1:{port} after {timeout:.0f} s")


def run_loopback(rounds: int, workdir: Path, timeout: float = 240.0) -> dict[str, object]:
    """Run the App on a loopback deployment; returns the ServerApp's log (weights and final model)."""
    home = workdir / "flwr_home"
    home.mkdir(parents=True, exist_ok=True)
    link = free_port()
    connection = f'[superlink.loopback]\naddress = "127.0.0.1:{link}"\ninsecure = true\n'
    (home / "config.toml").write_text(f'[superlink]\ndefault = "loopback"\n\n{connection}')
    env = {**os.environ, "FLWR_HOME": str(home), "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    env.setdefault("OMP_NUM_THREADS", "1")
    log_path = workdir / "serverapp_log.json"
    procs: list[subprocess.Popen[bytes]] = []
    logs = []
    try:
        out = (workdir / "superlink.log").open("wb")
        logs.append(out)
        procs.append(subprocess.Popen(
            [str(BIN / "flower-superlink"), "--insecure", "--host", "127.0.0.1", "--port", str(link),
             "--disable-runtime-dependency-installation"],
            env=env, stdout=out, stderr=subprocess.STDOUT,
        ))  # fmt: skip
        wait_for_port(link, 60)
        for i in range(3):
            out = (workdir / f"supernode{i}.log").open("wb")
            logs.append(out)
            procs.append(subprocess.Popen(
                [str(BIN / "flower-supernode"), "--insecure", "--superlink", f"127.0.0.1:{link}",
                 "--port", str(free_port()), "--node-config", f"partition-id={i} num-partitions=3"],
                env=env, stdout=out, stderr=subprocess.STDOUT,
            ))  # fmt: skip
        run_config = f'num-server-rounds={rounds} log-path="{log_path}"'
        submit = subprocess.run(
            [str(BIN / "flwr"), "run", str(APP), "loopback", "--run-config", run_config, "--stream"],
            env=env, capture_output=True, text=True, timeout=timeout,
        )  # fmt: skip
        (workdir / "flwr_run.log").write_text(submit.stdout + submit.stderr)
        deadline = time.monotonic() + 30
        while not log_path.exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        if not log_path.exists():
            raise RuntimeError(
                f"the ServerApp wrote no log (flwr run exit {submit.returncode}); see {workdir}/*.log:\n"
                + (submit.stdout + submit.stderr)[-3000:]
            )
        return json.loads(log_path.read_text())
    finally:
        for proc in reversed(procs):
            proc.terminate()
        for proc in reversed(procs):
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
        for out in logs:
            out.close()


def compare(flower: dict[str, object], engine: dict[str, object]) -> tuple[float, float]:
    """Largest absolute differences of the per-round weights and of the final target model."""
    a, b = np.asarray(flower["alpha"]), np.asarray(engine["alpha"])
    if a.shape != b.shape:
        raise ValueError(f"the Flower run logged weights of shape {a.shape}, the engine {b.shape}")
    return float(np.abs(a - b).max()), float(np.abs(np.asarray(flower["theta"]) - engine["theta"]).max())


def main(argv: list[str] | None = None) -> int:
    """Run the loopback deployment and the engine; print both weight tables and the differences."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5, help="server rounds (default 5)")
    parser.add_argument("--keep", type=Path, default=None, help="keep the process logs in this folder")
    args = parser.parse_args(argv)
    if args.rounds < 1:
        parser.error(f"--rounds must be >= 1, got {args.rounds}")
    from neurips26.methods.spcacw.flower_app import engine_reference

    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="spcacw_loopback_") as tmp:
        workdir = args.keep or Path(tmp)
        flower = run_loopback(args.rounds, workdir)
    wall = time.perf_counter() - start
    engine = engine_reference({"num-server-rounds": args.rounds})
    d_alpha, d_theta = compare(flower, engine)
    np.set_printoptions(precision=4, suppress=True)
    print(f"loopback deployment: 1 superlink + 3 supernodes, {args.rounds} rounds, {wall:.1f} s")
    print("weights per round (Flower):\n", np.asarray(flower["alpha"]))
    print("weights per round (in-process engine):\n", np.asarray(engine["alpha"]))
    print(f"max |alpha diff| = {d_alpha:.2e}, max |theta diff| = {d_theta:.2e}")
    ok = d_alpha <= 1e-5 and d_theta <= 1e-4
    print("AGREE" if ok else "DISAGREE")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
