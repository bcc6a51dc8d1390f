//! Node paths for error messages (`body[3].then[0].value`), built on the stack as a linked list
//! and rendered only when an error is reported.

use std::fmt;

#[derive(Clone, Copy)]
enum Seg {
    Root,
    Key(&'static str),
    Index(usize),
}

#[derive(Clone, Copy)]
pub struct Path<'a> {
    parent: Option<&'a Path<'a>>,
    seg: Seg,
}

impl<'a> Path<'a> {
    pub const ROOT: Path<'static> = Path { parent: None, seg: Seg::Root };

    pub fn key(&'a self, k: &'static str) -> Path<'a> {
        Path { parent: Some(self), seg: Seg::Key(k) }
    }

    pub fn index(&'a self, i: usize) -> Path<'a> {
        Path { parent: Some(self), seg: Seg::Index(i) }
    }
}

impl fmt::Display for Path<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut segs = Vec::new();
        let mut p = Some(self);
        while let Some(node) = p {
            segs.push(node.seg);
            p = node.parent;
        }
        let mut first = true;
        for seg in segs.iter().rev() {
            match seg {
                Seg::Root => {}
                Seg::Key(k) => {
                    if !first {
                        f.write_str(".")?;
                    }
                    f.write_str(k)?;
                    first = false;
                }
                Seg::Index(i) => {
                    write!(f, "[{i}]")?;
                    first = false;
                }
            }
        }
        if first {
            f.write_str("(root)")?;
        }
        Ok(())
    }
}
