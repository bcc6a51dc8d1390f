//! Safe conversions of raw JS arguments, so a value of the wrong type becomes
//! ERR_HELIOS_INVALID_ARGUMENT naming the parameter (napi's own conversion errors carry no
//! Helios code). Exports take `Unknown` and declare their TypeScript types with `ts_args_type`.

use napi::bindgen_prelude::{ArrayBuffer, FromNapiValue, JsValue, TypedArray, Unknown, ValueType};

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

/// `undefined` and `null` read as absent.
pub fn opt_num(v: Option<Unknown<'_>>, what: &str) -> HeliosResult<Option<f64>> {
    match v {
        None => Ok(None),
        Some(v) if matches!(v.get_type(), Ok(ValueType::Undefined | ValueType::Null)) => Ok(None),
        Some(v) => num(v, what).map(Some),
    }
}

pub fn nums(v: Unknown<'_>, what: &str) -> HeliosResult<Vec<f64>> {
    Vec::<f64>::from_unknown(v).map_err(|_| {
        if v.is_array().unwrap_or(false) {
            HeliosError::invalid_argument(format!("{what} must contain only numbers"))
        } else {
            expected(what, "an array of numbers", &v)
        }
    })
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
}

pub fn byte_view<'a>(v: Unknown<'a>, what: &str) -> HeliosResult<ByteView<'a>> {
    let bad = |v: &Unknown<'_>| expected(what, "an ArrayBuffer or a typed array", v);
    if v.is_typedarray().unwrap_or(false) {
        return TypedArray::from_unknown(v).map(ByteView::View).map_err(|e| HeliosError::invalid_argument(format!("{what}: {e}")));
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
