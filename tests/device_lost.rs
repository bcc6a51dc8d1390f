//! ERR_HELIOS_DEVICE_LOST cannot be provoked safely on lavapipe (or on a shared GPU host),
//! so this checks the mapping itself: a lost device reported by any Vulkan call becomes a
//! HeliosError with code DeviceLost, and reaches JS as `err.code === "ERR_HELIOS_DEVICE_LOST"`
//! with a message naming the call.

use helios::error::ErrorCode;
use helios::vk::raw;
use helios::vk::sync::vk_error;

#[test]
fn device_lost_maps_to_its_js_code() {
    let err = vk_error("vkQueueSubmit2", raw::Result::ERROR_DEVICE_LOST);
    assert_eq!(err.code, ErrorCode::DeviceLost);
    assert!(err.message.contains("vkQueueSubmit2"), "message: {}", err.message);
    let js: napi::Error<ErrorCode> = err.into();
    assert_eq!(js.status.as_ref(), "ERR_HELIOS_DEVICE_LOST");
}

#[test]
fn out_of_memory_results_map_to_their_js_code() {
    for result in [raw::Result::ERROR_OUT_OF_DEVICE_MEMORY, raw::Result::ERROR_OUT_OF_HOST_MEMORY] {
        let err = vk_error("vkAllocateMemory", result);
        assert_eq!(err.code, ErrorCode::OutOfMemory, "{result:?}");
        let js: napi::Error<ErrorCode> = err.into();
        assert_eq!(js.status.as_ref(), "ERR_HELIOS_OUT_OF_MEMORY");
    }
}
