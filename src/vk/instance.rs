//! Loader + VkInstance: libvulkan is opened at run time (ash `loaded`), validation is opt-in,
//! and the debug-utils messenger collects warnings and errors for `takeValidationMessages()`.

use std::ffi::{c_void, CStr};
use std::sync::Arc;

use ash::{ext, vk};
use parking_lot::Mutex;

use crate::error::{HeliosError, HeliosResult};

/// Validation messages (warnings and errors), drained by `takeValidationMessages()`.
pub type MessageSink = Arc<Mutex<Vec<String>>>;

const VALIDATION_LAYER: &CStr = c"VK_LAYER_KHRONOS_validation";

pub struct Instance {
    pub entry: ash::Entry,
    pub raw: ash::Instance,
    debug: Option<(ext::debug_utils::Instance, vk::DebugUtilsMessengerEXT)>,
    /// Kept alive here because the messenger holds a raw pointer to it.
    pub messages: MessageSink,
    pub validation: bool,
}

unsafe extern "system" fn on_message(
    severity: vk::DebugUtilsMessageSeverityFlagsEXT,
    _types: vk::DebugUtilsMessageTypeFlagsEXT,
    data: *const vk::DebugUtilsMessengerCallbackDataEXT<'_>,
    user: *mut c_void,
) -> vk::Bool32 {
    if data.is_null() || user.is_null() {
        return vk::FALSE;
    }
    // SAFETY: `user` is `Arc::as_ptr` of the sink owned by the Instance, which destroys the
    // messenger before dropping the sink; `data` is valid for the duration of the callback.
    let (sink, data) = unsafe { (&*(user as *const Mutex<Vec<String>>), &*data) };
    // SAFETY: the layer passes a NUL-terminated message (or null, checked by the accessor).
    let text = unsafe { data.message_as_c_str() }.map(|m| m.to_string_lossy().into_owned());
    let level = if severity.contains(vk::DebugUtilsMessageSeverityFlagsEXT::ERROR) { "error" } else { "warning" };
    let mut sink = sink.lock();
    if sink.len() < 10_000 {
        sink.push(format!("[{level}] {}", text.unwrap_or_default()));
    }
    vk::FALSE
}

fn load_entry() -> HeliosResult<ash::Entry> {
    // SAFETY: loading libvulkan runs its initialisers; the Vulkan loader is designed for dlopen.
    unsafe { ash::Entry::load() }.map_err(|e| {
        HeliosError::no_device(format!(
            "could not load the Vulkan loader (tried libvulkan.so.1 / libvulkan.so via dlopen: {e}); install libvulkan1 and a driver (e.g. mesa-vulkan-drivers)"
        ))
    })
}

fn has_layer(entry: &ash::Entry, name: &CStr) -> bool {
    // SAFETY: plain enumeration call on a loaded entry.
    let layers = unsafe { entry.enumerate_instance_layer_properties() }.unwrap_or_default();
    layers.iter().any(|l| l.layer_name_as_c_str().map(|n| n == name).unwrap_or(false))
}

impl Instance {
    pub fn new(validation: bool) -> HeliosResult<Instance> {
        let entry = load_entry()?;
        // SAFETY: plain query on a loaded entry.
        let version = unsafe { entry.try_enumerate_instance_version() }.ok().flatten().unwrap_or(vk::API_VERSION_1_0);
        if version < vk::API_VERSION_1_3 {
            return Err(HeliosError::no_device(format!(
                "the Vulkan loader supports only {}.{}; Helios needs Vulkan 1.3",
                vk::api_version_major(version),
                vk::api_version_minor(version)
            )));
        }
        let validation = validation && has_layer(&entry, VALIDATION_LAYER);
        let app = vk::ApplicationInfo::default()
            .application_name(c"helios")
            .engine_name(c"helios")
            .api_version(vk::API_VERSION_1_3);
        let layers = [VALIDATION_LAYER.as_ptr()];
        let exts = [ext::debug_utils::NAME.as_ptr()];
        let enables = [
            vk::ValidationFeatureEnableEXT::SYNCHRONIZATION_VALIDATION,
        ];
        let mut features = vk::ValidationFeaturesEXT::default().enabled_validation_features(&enables);
        let mut info = vk::InstanceCreateInfo::default().application_info(&app);
        if validation {
            info = info.enabled_layer_names(&layers).enabled_extension_names(&exts).push_next(&mut features);
        }
        // SAFETY: every pointer in `info` refers to locals that outlive the call.
        let raw = unsafe { entry.create_instance(&info, None) }
            .map_err(|e| HeliosError::no_device(format!("vkCreateInstance failed: {e}")))?;
        let messages: MessageSink = Arc::new(Mutex::new(Vec::new()));
        let mut instance = Instance { entry, raw, debug: None, messages, validation };
        if validation {
            instance.debug = Some(instance.create_messenger()?);
        }
        Ok(instance)
    }

    fn create_messenger(&self) -> HeliosResult<(ext::debug_utils::Instance, vk::DebugUtilsMessengerEXT)> {
        let loader = ext::debug_utils::Instance::new(&self.entry, &self.raw);
        let info = vk::DebugUtilsMessengerCreateInfoEXT::default()
            .message_severity(vk::DebugUtilsMessageSeverityFlagsEXT::WARNING | vk::DebugUtilsMessageSeverityFlagsEXT::ERROR)
            .message_type(
                vk::DebugUtilsMessageTypeFlagsEXT::GENERAL
                    | vk::DebugUtilsMessageTypeFlagsEXT::VALIDATION
                    | vk::DebugUtilsMessageTypeFlagsEXT::PERFORMANCE,
            )
            .pfn_user_callback(Some(on_message))
            .user_data(Arc::as_ptr(&self.messages) as *mut c_void);
        // SAFETY: the user-data pointer stays valid until Drop destroys the messenger first.
        let messenger = unsafe { loader.create_debug_utils_messenger(&info, None) }
            .map_err(|e| HeliosError::internal(format!("vkCreateDebugUtilsMessengerEXT failed: {e}")))?;
        Ok((loader, messenger))
    }
}

impl Drop for Instance {
    fn drop(&mut self) {
        if let Some((loader, messenger)) = self.debug.take() {
            // SAFETY: the messenger was created from this instance and is destroyed once.
            unsafe { loader.destroy_debug_utils_messenger(messenger, None) };
        }
        // SAFETY: every child object (device, messenger) is destroyed before the instance.
        unsafe { self.raw.destroy_instance(None) };
    }
}
