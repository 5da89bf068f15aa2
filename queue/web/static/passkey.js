// Passkeys (docs/security.md#passkeys): enrolment on /passkeys, sign-in on /login, through the
// browser's WebAuthn API. The server keeps each ceremony's challenge; this only carries the
// options to navigator.credentials and its answer back.
"use strict";
(function () {
  var status = document.getElementById("passkey-status");
  function say(msg) { if (status) { status.textContent = msg; } }

  function post(url, body, csrf) {
    var headers = { "Content-Type": "application/json" };
    if (csrf) { headers["X-CSRF-Token"] = csrf; }
    return fetch(url, { method: "POST", headers: headers, body: JSON.stringify(body), credentials: "same-origin" })
      .then(function (r) {
        return r.json().catch(function () { return {}; }).then(function (j) {
          if (!r.ok) { throw new Error(j.error || r.statusText); }
          return j;
        });
      });
  }

  function supported() {
    if (window.PublicKeyCredential && PublicKeyCredential.parseCreationOptionsFromJSON) { return true; }
    say("this browser has no passkey support (WebAuthn JSON options): sign in with a token");
    return false;
  }

  var enroll = document.getElementById("passkey-enroll");
  if (enroll) {
    enroll.addEventListener("submit", function (ev) {
      ev.preventDefault();
      if (!supported()) { return; }
      var csrf = enroll.dataset.csrf;
      say("touch your authenticator…");
      post("/passkeys/enroll/begin", { name: enroll.elements.name.value }, csrf)
        .then(function (opts) {
          return navigator.credentials.create({ publicKey: PublicKeyCredential.parseCreationOptionsFromJSON(opts.publicKey) });
        })
        .then(function (cred) { return post("/passkeys/enroll/finish", cred.toJSON(), csrf); })
        .then(function (res) { say("enrolled passkey " + res.name); window.location.reload(); })
        .catch(function (e) { say("enrolment failed: " + e.message); });
    });
  }

  var login = document.getElementById("passkey-login");
  if (login) {
    login.addEventListener("submit", function (ev) {
      ev.preventDefault();
      if (!supported()) { return; }
      say("touch your authenticator…");
      post("/login/passkey/begin", { owner: login.elements.owner.value })
        .then(function (opts) {
          return navigator.credentials.get({ publicKey: PublicKeyCredential.parseRequestOptionsFromJSON(opts.publicKey) });
        })
        .then(function (cred) { return post("/login/passkey/finish", cred.toJSON()); })
        .then(function (res) { window.location.assign(res.redirect || "/"); })
        .catch(function (e) { say("sign-in failed: " + e.message); });
    });
  }
})();
