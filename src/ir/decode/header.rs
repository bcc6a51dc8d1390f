//! Top-level declarations: workgroup size, bindings, push constants, spec constants, shared
//! arrays; and the device-limit checks that need the whole kernel.

use crate::ir::json::Value;

use crate::caps::{Access, CoopScope};
use crate::error::{HeliosError, HeliosResult};

use super::super::ast::{Binding, PushField, SharedArray, SpecConst, WorkgroupDim};
use super::super::limits;
use super::super::path::Path;
use super::super::types::{Scalar, Type};
use super::{kind_of, truncate, Decoder, Obj};

pub(super) const TOP_FIELDS: &[&str] =
    &["version", "name", "workgroup", "bindings", "push", "spec", "shared", "subgroupSize", "body"];

pub(super) fn valid_kernel_name(n: &str) -> bool {
    let mut chars = n.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
        && n.len() <= 128
}

impl Decoder<'_> {
    pub(super) fn decode_header(&mut self, top: &Obj, root: &Path) -> HeliosResult<()> {
        if let Some(v) = top.get("spec") {
            self.decode_spec(v, &root.key("spec"))?;
        }
        self.decode_workgroup(self.req(top, "workgroup", root)?, &root.key("workgroup"))?;
        self.decode_bindings(self.req(top, "bindings", root)?, &root.key("bindings"))?;
        if let Some(v) = top.get("push") {
            self.decode_push(v, &root.key("push"))?;
        }
        if let Some(v) = top.get("shared") {
            self.decode_shared(v, &root.key("shared"))?;
        }
        if let Some(v) = top.get("subgroupSize") {
            let p = root.key("subgroupSize");
            let n = self.u32_of(v, &p)?;
            if !n.is_power_of_two() || !(1..=128).contains(&n) {
                return Err(self.err(&p, format!("subgroup size {n} must be a power of two in 1..=128")));
            }
            self.kernel.subgroup_size = Some(n);
        }
        Ok(())
    }

    fn decode_workgroup(&mut self, v: &Value, path: &Path) -> HeliosResult<()> {
        let dims = self.array(v, path)?;
        if dims.is_empty() || dims.len() > 3 {
            return Err(self.err(path, "workgroup needs 1 to 3 sizes"));
        }
        for (i, d) in dims.iter().enumerate() {
            let p = path.index(i);
            self.kernel.workgroup[i] = match d {
                Value::String(name) => {
                    let idx = *self.spec_names.get(name.as_str()).ok_or_else(|| self.err(&p, format!("undefined spec constant '{}'", truncate(name, 40))))?;
                    if self.kernel.spec[idx as usize].ty != Scalar::U32 {
                        return Err(self.err(&p, "a workgroup size spec constant must be u32"));
                    }
                    WorkgroupDim::Spec(idx)
                }
                _ => {
                    let n = self.u32_of(d, &p)?;
                    if n == 0 {
                        return Err(self.err(&p, "workgroup size must be positive"));
                    }
                    WorkgroupDim::Fixed(n)
                }
            };
        }
        Ok(())
    }

    fn decode_bindings(&mut self, v: &Value, path: &Path) -> HeliosResult<()> {
        let list = self.array(v, path)?;
        if list.len() > limits::MAX_BINDINGS {
            return Err(self.err(path, format!("{} bindings, over the limit of {}", list.len(), limits::MAX_BINDINGS)));
        }
        for (i, b) in list.iter().enumerate() {
            let p = path.index(i);
            let o = self.obj(b, &p)?;
            self.check_fields(o, &p, &["name", "elem", "access"])?;
            let name = self.req_str(o, "name", &p)?.to_string();
            let elem_s = self.req_str(o, "elem", &p)?;
            let elem = match Scalar::parse(elem_s) {
                Some(Scalar::Bool) | None => {
                    return Err(self.err(&p.key("elem"), format!("binding element type must be f32, f16, bf16, i32 or u32, got '{}'", truncate(elem_s, 20))))
                }
                Some(s) => s,
            };
            self.note_type(Type::Scalar(elem), &p.key("elem"))?;
            if matches!(elem, Scalar::F16 | Scalar::Bf16) {
                if !self.caps.storage_16bit {
                    return Err(self.err(&p.key("elem"), "16-bit storage buffers need storageBuffer16BitAccess, which this device lacks"));
                }
                self.kernel.uses.storage16 = true;
            }
            let acc_s = self.req_str(o, "access", &p)?;
            let access = Access::parse(acc_s).ok_or_else(|| self.err(&p.key("access"), format!("access must be read, write or readwrite, got '{}'", truncate(acc_s, 20))))?;
            if self.binding_names.insert(name.clone(), i as u32).is_some() {
                return Err(self.err(&p.key("name"), format!("duplicate binding name '{name}'")));
            }
            self.kernel.bindings.push(Binding { name, elem, access, views: Vec::new() });
        }
        Ok(())
    }

    fn decode_push(&mut self, v: &Value, path: &Path) -> HeliosResult<()> {
        let mut offset = 0u32;
        for (i, f) in self.array(v, path)?.iter().enumerate() {
            let p = path.index(i);
            let o = self.obj(f, &p)?;
            self.check_fields(o, &p, &["name", "type"])?;
            let name = self.req_str(o, "name", &p)?.to_string();
            let ts = self.req_str(o, "type", &p)?;
            let ty = match Type::parse_value(ts) {
                Some(t @ (Type::Scalar(s) | Type::Vector(s, 2 | 4)))
                    if matches!(s, Scalar::U32 | Scalar::I32 | Scalar::F32) => t,
                _ => return Err(self.err(&p.key("type"), format!("push field type must be u32, i32, f32 or their x2/x4 vectors, got '{}'", truncate(ts, 20)))),
            };
            let align = ty.align();
            offset = offset.div_ceil(align) * align;
            if self.push_names.insert(name.clone(), i as u32).is_some() {
                return Err(self.err(&p.key("name"), format!("duplicate push field '{name}'")));
            }
            self.kernel.push.push(PushField { name, ty, offset });
            offset += ty.bytes();
        }
        if offset > self.caps.max_push_constant_bytes {
            return Err(self.err(path, format!("push constants take {offset} bytes, over the device limit of {}", self.caps.max_push_constant_bytes)));
        }
        Ok(())
    }

    fn decode_spec(&mut self, v: &Value, path: &Path) -> HeliosResult<()> {
        for (i, s) in self.array(v, path)?.iter().enumerate() {
            let p = path.index(i);
            let o = self.obj(s, &p)?;
            self.check_fields(o, &p, &["name", "id", "type", "value"])?;
            let name = self.req_str(o, "name", &p)?.to_string();
            let id = self.u32_of(self.req(o, "id", &p)?, &p.key("id"))?;
            let ts = self.req_str(o, "type", &p)?;
            let ty = match Scalar::parse(ts) {
                Some(s @ (Scalar::U32 | Scalar::I32 | Scalar::F32 | Scalar::Bool)) => s,
                _ => return Err(self.err(&p.key("type"), format!("spec constant type must be u32, i32, f32 or bool, got '{}'", truncate(ts, 20)))),
            };
            let vp = p.key("value");
            let val = self.req(o, "value", &p)?;
            let bits = match (ty, val) {
                (Scalar::Bool, Value::Bool(b)) => u32::from(*b),
                (Scalar::U32, _) => self.u32_of(val, &vp)?,
                (Scalar::I32, Value::Number(n)) => match n.as_i64().and_then(|x| i32::try_from(x).ok()) {
                    Some(x) => x as u32,
                    None => return Err(self.err(&vp, "expected a 32-bit signed integer")),
                },
                (Scalar::F32, Value::Number(n)) => (n.as_f64().unwrap_or(0.0) as f32).to_bits(),
                _ => return Err(self.err(&vp, format!("expected a {} value, got {}", ty.name(), kind_of(val)))),
            };
            if self.kernel.spec.iter().any(|s| s.id == id) {
                return Err(self.err(&p.key("id"), format!("duplicate spec constant id {id}")));
            }
            if self.spec_names.insert(name.clone(), i as u32).is_some() {
                return Err(self.err(&p.key("name"), format!("duplicate spec constant '{name}'")));
            }
            self.kernel.spec.push(SpecConst { name, id, ty, bits });
        }
        Ok(())
    }

    fn decode_shared(&mut self, v: &Value, path: &Path) -> HeliosResult<()> {
        let mut total: u64 = 0;
        for (i, s) in self.array(v, path)?.iter().enumerate() {
            let p = path.index(i);
            let o = self.obj(s, &p)?;
            self.check_fields(o, &p, &["name", "elem", "len"])?;
            let name = self.req_str(o, "name", &p)?.to_string();
            let es = self.req_str(o, "elem", &p)?;
            let elem = match Type::parse_value(es) {
                Some(t) if t.scalar() != Scalar::Bool => t,
                _ => return Err(self.err(&p.key("elem"), format!("shared element type must be a non-bool scalar or vector, got '{}'", truncate(es, 20)))),
            };
            self.note_type(elem, &p.key("elem"))?;
            let len = self.u32_of(self.req(o, "len", &p)?, &p.key("len"))?;
            if len == 0 || len > limits::MAX_ARRAY_LEN {
                return Err(self.err(&p.key("len"), format!("length must be in 1..={}", limits::MAX_ARRAY_LEN)));
            }
            total += u64::from(len) * u64::from(elem.bytes());
            if self.shared_names.insert(name.clone(), i as u32).is_some() {
                return Err(self.err(&p.key("name"), format!("duplicate shared array '{name}'")));
            }
            self.kernel.shared.push(SharedArray { name, elem, len, vec: 1, coop_views: Vec::new() });
        }
        if total > u64::from(self.caps.max_shared_memory_bytes) {
            return Err(self.err(path, format!("shared arrays take {total} bytes, over the device limit of {}", self.caps.max_shared_memory_bytes)));
        }
        Ok(())
    }

    /// Checks that the device can hold values of type `t` and records the capability it needs.
    pub(crate) fn note_type(&mut self, t: Type, path: &Path) -> HeliosResult<()> {
        match t.scalar() {
            Scalar::F16 => {
                if !self.caps.f16 {
                    return Err(self.err(path, "f16 needs shaderFloat16, which this device lacks"));
                }
                self.kernel.uses.f16 = true;
            }
            Scalar::Bf16 => {
                if !self.caps.bf16 {
                    return Err(self.err(path, "bf16 needs VK_KHR_shader_bfloat16, which this device lacks"));
                }
                self.kernel.uses.bf16 = true;
            }
            _ => {}
        }
        if let Type::CoopMat(c) = t {
            self.check_coop_type(c, path)?;
            if c.scope == CoopScope::Workgroup {
                self.kernel.uses.coopmat2 = true;
            }
            self.kernel.uses.coopmat = true;
        }
        Ok(())
    }

    /// Checks that need the whole kernel: workgroup size limits.
    pub(super) fn finish_checks(&self, root: &Path) -> HeliosResult<()> {
        for (i, sh) in self.kernel.shared.iter().enumerate() {
            let w = u32::from(sh.vec);
            if !sh.len.is_multiple_of(w) {
                let p = root.key("shared");
                let pi = p.index(i);
                return Err(self.err(&pi.key("len"), format!("shared array '{}' is read as {}-wide vectors: its length must be a multiple of {w}", sh.name, w)));
            }
            if let Some((cw, at)) = sh.coop_views.iter().find(|(cw, _)| *cw != sh.vec) {
                return Err(HeliosError::invalid_kernel(format!(
                    "{}: {at}: cooperative matrices on shared array '{}' must use its widest view (vec {}), not vec {cw}: idx and stride then count {}-wide vectors",
                    self.kernel.name, sh.name, sh.vec, sh.vec
                )));
            }
        }
        let mut total: u64 = 1;
        for (i, d) in self.kernel.workgroup.iter().enumerate() {
            let n = match d {
                WorkgroupDim::Fixed(n) => *n,
                WorkgroupDim::Spec(s) => self.kernel.spec[*s as usize].bits,
            };
            if n == 0 || n > self.caps.max_workgroup_size[i] {
                return Err(self.err(&root.key("workgroup").index(i), format!("workgroup size {n} is outside 1..={}", self.caps.max_workgroup_size[i])));
            }
            total *= u64::from(n);
        }
        if total > u64::from(self.caps.max_workgroup_invocations) {
            return Err(self.err(&root.key("workgroup"), format!("{total} invocations per workgroup, over the device limit of {}", self.caps.max_workgroup_invocations)));
        }
        Ok(())
    }

    pub(crate) fn binding_index(&self, v: &Value, path: &Path) -> HeliosResult<u32> {
        let b = self.u32_of(v, path)?;
        if b as usize >= self.kernel.bindings.len() {
            return Err(self.err(path, format!("binding {b} is out of range: the kernel declares {}", self.kernel.bindings.len())));
        }
        Ok(b)
    }

    pub(crate) fn shared_index(&self, name: &str, path: &Path) -> HeliosResult<u32> {
        self.shared_names.get(name).copied().ok_or_else(|| self.err(path, format!("undefined shared array '{}'", truncate(name, 40))))
    }

    pub(crate) fn push_index(&self, name: &str, path: &Path) -> HeliosResult<u32> {
        self.push_names.get(name).copied().ok_or_else(|| self.err(path, format!("undefined push field '{}'", truncate(name, 40))))
    }

    pub(crate) fn spec_index(&self, name: &str, path: &Path) -> HeliosResult<u32> {
        self.spec_names.get(name).copied().ok_or_else(|| self.err(path, format!("undefined spec constant '{}'", truncate(name, 40))))
    }
}
