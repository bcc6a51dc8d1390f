// Public entry point of @alpha/helios.
export { native } from "./native.js";
