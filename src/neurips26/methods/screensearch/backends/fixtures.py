"""Loopback web fixtures with hidden state (ours; issue #32), one self-contained HTML page each.

- :func:`wizard_fixture`: a four-step wizard. Step 1 offers plans Basic/Pro (radio buttons) and Next;
  step 2 ("Details") looks the same whatever the plan; its Next leads to "Billing" for Pro and to
  "Summary" for Basic: identical screens, different successors (the earlier choice is hidden).
- :func:`todo_fixture`: a to-do list (add items from a text box, check them, clear the done ones).
- :func:`settings_fixture`: a settings page with tabs, a dark-mode switch and an irreversible "Delete
  account" that ends in a page without controls.
"""

from __future__ import annotations

_HEAD = "<!doctype html><html><head><meta charset='utf-8'><title>{title}</title></head><body><main id='app'>"
_TAIL = "</main><script>{script}</script></body></html>"

_WIZARD = """
let s = {step: 1, plan: null};
function go(step) { s.step = step; render(); }
function render() {
  const app = document.getElementById('app');
  if (s.step === 1) {
    app.innerHTML = `<h1>Choose a plan</h1>
      <label><input type=radio name=plan value=basic ${s.plan==='basic'?'checked':''}> Basic</label>
      <label><input type=radio name=plan value=pro ${s.plan==='pro'?'checked':''}> Pro</label>
      <button id=next ${s.plan?'':'disabled'}>Next</button>`;
    app.querySelectorAll('input').forEach(i => i.onclick = () => { s.plan = i.value; render(); });
    app.querySelector('#next').onclick = () => go(2);
  } else if (s.step === 2) {
    app.innerHTML = `<h1>Details</h1><p>Enter your details.</p>
      <button id=back>Back</button><button id=next>Next</button>`;
    app.querySelector('#back').onclick = () => go(1);
    app.querySelector('#next').onclick = () => go(s.plan === 'pro' ? 3 : 4);
  } else if (s.step === 3) {
    app.innerHTML = `<h1>Billing</h1><label><input type=checkbox> Yearly</label>
      <button id=back>Back</button><button id=next>Next</button>`;
    app.querySelector('#back').onclick = () => go(2);
    app.querySelector('#next').onclick = () => go(4);
  } else {
    app.innerHTML = `<h1>Summary</h1><p>Plan: confirmed.</p><button id=restart>Start over</button>`;
    app.querySelector('#restart').onclick = () => { s = {step: 1, plan: null}; render(); };
  }
}
render();
"""

_TODO = """
let items = [];
function render() {
  const app = document.getElementById('app');
  app.innerHTML = `<h1>To do</h1><input id=new aria-label='New item'>
    <ul>${items.map((t, i) => `<li><label><input type=checkbox data-i=${i} ${t.done?'checked':''}>
      ${t.text} ${i + 1}</label></li>`).join('')}</ul>
    <button id=clear ${items.some(t => t.done)?'':'disabled'}>Clear done</button>`;
  const box = app.querySelector('#new');
  box.onkeydown = e => { if (e.key === 'Enter' && box.value && items.length < 4) {
    items.push({text: box.value, done: false}); render(); app.querySelector('#new').focus(); } };
  app.querySelectorAll('li input').forEach(c => c.onclick = () => {
    items[c.dataset.i].done = !items[c.dataset.i].done; render(); });
  app.querySelector('#clear').onclick = () => { items = items.filter(t => !t.done); render(); };
}
render();
"""

_SETTINGS = """
let s = {tab: 'general', dark: false, deleted: false};
function render() {
  const app = document.getElementById('app');
  if (s.deleted) { app.innerHTML = '<h1>Account deleted</h1><p>Goodbye.</p>'; return; }
  const tabs = ['general', 'privacy', 'account'].map(t =>
    `<button role=tab aria-selected=${s.tab===t} data-t=${t}>${t[0].toUpperCase() + t.slice(1)}</button>`
  ).join('');
  let body = '';
  if (s.tab === 'general') body = `<label><input type=checkbox role=switch ${s.dark?'checked':''} id=dark>
    Dark mode</label>`;
  if (s.tab === 'privacy') body = `<label><input type=checkbox> Share usage data</label>`;
  if (s.tab === 'account') body = `<button id=del>Delete account</button>`;
  app.innerHTML = `<h1>Settings</h1><div role=tablist>${tabs}</div><section>${body}</section>`;
  app.querySelectorAll('[role=tab]').forEach(b => b.onclick = () => { s.tab = b.dataset.t; render(); });
  const dark = app.querySelector('#dark'); if (dark) dark.onclick = () => { s.dark = !s.dark; render(); };
  const del = app.querySelector('#del'); if (del) del.onclick = () => { s.deleted = true; render(); };
}
render();
"""


def _page(title: str, script: str) -> str:
    return _HEAD.format(title=title) + _TAIL.format(script=script)


def wizard_fixture() -> dict[str, str]:
    """The plan wizard (hidden earlier choice) at ``/``."""
    return {"/": _page("Wizard", _WIZARD)}


def todo_fixture() -> dict[str, str]:
    """The to-do list at ``/``."""
    return {"/": _page("To do", _TODO)}


def settings_fixture() -> dict[str, str]:
    """The settings page (tabs, a switch, an irreversible delete) at ``/``."""
    return {"/": _page("Settings", _SETTINGS)}


FIXTURES = {"web_wizard": wizard_fixture, "web_todo": todo_fixture, "web_settings": settings_fixture}
