//! Safe conversions of raw JS arguments, so a value of the wrong type becomes
//! ERR_HELIOS_INVALID_ARGUMENT naming the parameter (napi's own conversion errors carry no
//! Helios code). Exports take `Unknown` and declare their TypeScript types with `ts_args_type`.

use napi::bindgen_prelude::{Array, ArrayBuffer, Either, FromNapiValue, JsValue, Object, TypedArray, Uint32Array, Unknown, ValueType};

use crate::error::{HeliosError, HeliosResult};

fn type_of(v: &Unknown<'_>) -> String {
    match v.get_type() {
        Ok(t) => format!("{t:?}").to_lowercase(),
        Err(_) => "an unknown value".to_string(),
    }
}

fn expected(what: &str, kind: &str, v: &Unknown<'_>) -> HeliosError {
    HeliosError::invalid_argument(format!("{what} must be {kind}, got {}", type_of(v)))
}

pub fn num(v: Unknown<'_>, what: &str) -> HeliosResult<f64> {
    // One napi call on the hot path; the type is only looked up to explain a failure.
    f64::from_unknown(v).map_err(|_| expected(what, "a number", &v))
}

/// `n` as JavaScript prints it where Rust differs (`inf`), so messages quote what the caller passed.
pub fn js_number(n: f64) -> String {
    match n {
        f64::INFINITY => "Infinity".to_string(),
        f64::NEG_INFINITY => "-Infinity".to_string(),
        _ => n.to_string(),
    }
}

/// An integer count in 0..=2^32-1 (napi's own u32 conversion wraps -1 to 2^32-1 and reads NaN
/// as 0).
pub fn count(v: Unknown<'_>, what: &str) -> HeliosResult<u32> {
    let n = num(v, what)?;
    if !(n.is_finite() && n.fract() == 0.0 && (0.0..=u32::MAX as f64).contains(&n)) {
        return Err(HeliosError::invalid_argument(format!("{what} = {} is not an integer from 0 to 4294967295", js_number(n))));
    }
    Ok(n as u32)
}

/// A Uint32Array, and nothing else (not an Int32Array of the same bytes, not an ArrayBuffer).
pub fn u32_array(v: Unknown<'_>, what: &str) -> HeliosResult<Uint32Array> {
    Uint32Array::from_unknown(v).map_err(|e| {
        let got = if v.is_typedarray().unwrap_or(false) { e.reason.clone() } else { format!("got {}", type_of(&v)) };
        HeliosError::invalid_argument(format!("{what} must be a Uint32Array ({got})"))
    })
}

/// A string, and nothing else.
pub fn text(v: Unknown<'_>, what: &str) -> HeliosResult<String> {
    if !matches!(v.get_type(), Ok(ValueType::String)) {
        return Err(expected(what, "a string", &v));
    }
    String::from_unknown(v).map_err(|e| HeliosError::invalid_argument(format!("{what}: {}", e.reason)))
}

/// A file-system path: not empty, no NUL byte (the OS would cut the path there).
pub fn path(s: String, what: &str) -> HeliosResult<std::path::PathBuf> {
    if s.is_empty() || s.contains('\0') {
        return Err(HeliosError::invalid_argument(format!("{what} {s:?} is not a path (empty or with a NUL byte)")));
    }
    Ok(s.into())
}

/// An options object converted by napi (`#[napi(object)]`); `undefined` and `null` read as
/// absent, and napi's message (which names the bad field) follows the argument's name.
pub fn opt_object<T: FromNapiValue>(v: Option<Unknown<'_>>, what: &str) -> HeliosResult<Option<T>> {
    match v {
        None => Ok(None),
        Some(v) if matches!(v.get_type(), Ok(ValueType::Undefined | ValueType::Null)) => Ok(None),
        Some(v) => object(v, what).map(Some),
    }
}

/// A required object converted by napi (see `opt_object`).
pub fn object<T: FromNapiValue>(v: Unknown<'_>, what: &str) -> HeliosResult<T> {
    if !matches!(v.get_type(), Ok(ValueType::Object)) {
        return Err(expected(what, "an object", &v));
    }
    T::from_unknown(v).map_err(|e| HeliosError::invalid_argument(format!("{what}: {}", e.reason)))
}

/// A kernel description: a JSON string or an object (serialized by the caller).
pub fn desc<'a>(v: Unknown<'a>, what: &str) -> HeliosResult<Either<String, Object<'a>>> {
    match v.get_type() {
        Ok(ValueType::String) => String::from_unknown(v).map(Either::A),
        Ok(ValueType::Object) => Object::from_unknown(v).map(Either::B),
        _ => return Err(expected(what, "a JSON string or an object", &v)),
    }
    .map_err(|e| HeliosError::invalid_argument(format!("{what}: {}", e.reason)))
}

/// `undefined` and `null` read as absent.
pub fn opt_num(v: Option<Unknown<'_>>, what: &str) -> HeliosResult<Option<f64>> {
    match v {
        None => Ok(None),
        Some(v) if matches!(v.get_type(), Ok(ValueType::Undefined | ValueType::Null)) => Ok(None),
        Some(v) => num(v, what).map(Some),
    }
}

/// Reads a short array of numbers into `out` without allocating (the recordDispatch hot
/// path); returns how many were read.
pub fn nums_into(v: Unknown<'_>, what: &str, out: &mut [f64]) -> HeliosResult<usize> {
    let arr = Array::from_unknown(v).map_err(|_| expected(what, "an array of numbers", &v))?;
    let n = arr.len() as usize;
    if n > out.len() {
        return Err(HeliosError::invalid_argument(format!("{what} has {n} entries; at most {} are allowed", out.len())));
    }
    for (i, slot) in out[..n].iter_mut().enumerate() {
        *slot = match arr.get::<f64>(i as u32) {
            Ok(Some(x)) => x,
            _ => return Err(HeliosError::invalid_argument(format!("{what}[{i}] must be a number"))),
        };
    }
    Ok(n)
}

/// An ArrayBuffer or any typed-array view (Node Buffers included).
pub enum ByteView<'a> {
    Buffer(ArrayBuffer<'a>),
    View(TypedArray<'a>),
    Empty,
}

impl ByteView<'_> {
    pub fn as_slice(&self) -> &[u8] {
        match self {
            ByteView::Buffer(b) => b,
            ByteView::View(v) => &v.arraybuffer,
            ByteView::Empty => &[],
        }
    }

    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        match self {
            ByteView::Buffer(b) => crate::vk::host_result::writable(b),
            ByteView::View(v) => crate::vk::host_result::writable(&mut v.arraybuffer),
            ByteView::Empty => &mut [],
        }
    }
}

pub fn byte_view<'a>(v: Unknown<'a>, what: &str) -> HeliosResult<ByteView<'a>> {
    let bad = |v: &Unknown<'_>| expected(what, "an ArrayBuffer or a typed array", v);
    // Typed arrays first and without a type probe: napi_get_typedarray_info fails cleanly on
    // anything else, and this is one napi call fewer on the recordDispatch hot path.
    if let Ok(view) = TypedArray::from_unknown(v) {
        return Ok(ByteView::View(view));
    }
    if v.is_arraybuffer().unwrap_or(false) {
        return ArrayBuffer::from_unknown(v).map(ByteView::Buffer).map_err(|e| HeliosError::invalid_argument(format!("{what}: {e}")));
    }
    Err(bad(&v))
}

/// napi maps `undefined` and `null` to `None` before we see them.
pub fn opt_byte_view<'a>(v: Option<Unknown<'a>>, what: &str) -> HeliosResult<ByteView<'a>> {
    v.map_or(Ok(ByteView::Empty), |v| byte_view(v, what))
}
