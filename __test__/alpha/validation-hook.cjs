// Preloaded (NODE_OPTIONS=--require) into the Node processes of scripts/test-alpha.sh that run
// Alpha's code on Helios with HELIOS_VALIDATION=1. Alpha never reads the validation layer's
// messages (Helios collects them; `takeValidationMessages()`), so this does, without touching
// Alpha: it drains them before every `destroy()` (Alpha's destroyDevice) and at exit, and appends
// them to $HELIOS_ALPHA_VALIDATION_LOG, which the test script checks after each stage. Processes
// that created a device are listed in $HELIOS_ALPHA_VALIDATION_LOG.checked when first drained.
"use strict";
const fs = require("node:fs");

const addonLoader = process.env.HELIOS_ALPHA_NATIVE; // packages/helios/native/index.cjs in the copy
const logFile = process.env.HELIOS_ALPHA_VALIDATION_LOG;
if (addonLoader && logFile && fs.existsSync(addonLoader)) {
  // The same module object Helios's dist/ts/native-load.js gets (Node's require cache), so the
  // wrappers below are what Helios calls.
  const native = require(addonLoader);
  const label = process.argv.slice(1).join(" ").slice(0, 200);
  let deviceSeen = false;
  let listed = false;
  const drain = () => {
    if (!deviceSeen) return;
    const messages = native.takeValidationMessages();
    if (messages.length > 0) {
      fs.appendFileSync(logFile, messages.map((m) => `[${label}] ${m}\n`).join(""));
    }
    if (!listed) {
      listed = true;
      fs.appendFileSync(`${logFile}.checked`, `${process.pid} ${label}\n`);
    }
  };
  const initDevice = native.initDevice;
  native.initDevice = function (...args) {
    const info = initDevice.apply(this, args);
    deviceSeen = true;
    return info;
  };
  const destroy = native.destroy;
  native.destroy = function (...args) {
    drain();
    return destroy.apply(this, args);
  };
  process.on("exit", drain);
}
