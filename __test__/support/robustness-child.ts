// Prints the robustness initDevice enabled under this process's HELIOS_ROBUSTNESS, or the error
// it threw (hardening.test.ts).
import { native } from "../../ts/native.js";

try {
  const info = native.initDevice({ validation: true });
  const messages = native.takeValidationMessages();
  console.log(JSON.stringify({ robustness: info.robustness, messages }));
  native.destroy();
} catch (e) {
  const err = e as { code?: string; message: string };
  console.log(JSON.stringify({ code: err.code, message: err.message }));
}
