// The status page's live part: refresh the server-rendered fragment, send the admin key, run actions.
// The server renders every view (GET /ui/status); this script only swaps it in, so the page and its
// updates come from one renderer (router/ops/ui/render.py).
"use strict";

const KEY_STORAGE = "rapidmlx-admin-key";
const REFRESH_MS = 2000;
const ACTIONS = {
  reload: { url: () => "/admin/reload", ask: () => "Reload the config file now?" },
  load: { url: (model) => `/admin/models/${encodeURIComponent(model)}/load`, ask: (model) => `Load model ${model}?` },
  unload: { url: (model) => `/admin/models/${encodeURIComponent(model)}/unload`, ask: (model) => `Unload model ${model}?` },
};

document.documentElement.classList.add("js");
const keysConfigured = document.body.dataset.keys === "on";
const statusRoot = document.getElementById("status");
const result = document.getElementById("result");
let refusedKey = null;  // an admin key the server refused: not sent again until a new one is entered

function storedKey() {
  return sessionStorage.getItem(KEY_STORAGE);
}

function authHeaders() {
  const key = storedKey();
  return key ? { Authorization: `Bearer ${key}` } : {};
}

function say(text, failed) {
  result.textContent = text;
  result.className = failed ? "failed" : "ok";
}

async function errorText(response) {
  try {
    const body = await response.json();
    return body.error && body.error.message ? body.error.message : `HTTP ${response.status}`;
  } catch (_) {
    return `HTTP ${response.status}`;
  }
}

async function refresh() {
  if (keysConfigured && (!storedKey() || storedKey() === refusedKey)) {
    return;  // nothing to show without an admin key; the form asks for one
  }
  let response;
  try {
    response = await fetch("/ui/status", { headers: authHeaders(), cache: "no-store" });
  } catch (error) {
    say(`The server did not answer: ${error.message}`, true);
    return;
  }
  if (response.status === 401 || response.status === 403) {
    refusedKey = storedKey();
    say(`Refused: ${await errorText(response)}`, true);
    return;
  }
  if (!response.ok) {
    say(`Status: ${await errorText(response)}`, true);
    return;
  }
  statusRoot.innerHTML = await response.text();  // the server escaped every value
}

async function act(action, model) {
  const spec = ACTIONS[action];
  if (!window.confirm(spec.ask(model))) {
    return;
  }
  const label = model ? `${action} ${model}` : action;
  say(`${label}: working…`, false);
  let response;
  try {
    response = await fetch(spec.url(model), { method: "POST", headers: authHeaders() });
  } catch (error) {
    say(`${label}: the server did not answer: ${error.message}`, true);
    return;
  }
  if (response.ok) {
    say(`${label}: done.`, false);
  } else {
    say(`${label} refused: ${await errorText(response)}`, true);
  }
  await refresh();
}

document.addEventListener("click", (event) => {
  const button = event.target.closest("button[data-action]");
  if (button) {
    act(button.dataset.action, button.dataset.model);
  }
});

document.getElementById("key-form").addEventListener("submit", (event) => {
  event.preventDefault();
  const input = document.getElementById("admin-key");
  if (input.value) {
    sessionStorage.setItem(KEY_STORAGE, input.value);
    input.value = "";
    refusedKey = null;
    say("Key kept for this tab.", false);
    refresh();
  }
});

document.getElementById("forget-key").addEventListener("click", () => {
  sessionStorage.removeItem(KEY_STORAGE);
  say("Key forgotten.", false);
});

refresh();
setInterval(refresh, REFRESH_MS);
