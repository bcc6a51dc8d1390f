//! Control flow of each function: branch and merge targets are blocks of the same function,
//! merges lie after their headers, the only backward branches are a loop's back edges, and
//! every value is used only where its definition dominates (SSA).

use std::collections::HashMap;

use rspirv::dr::{Function, Instruction, Operand};
use rspirv::spirv::{Op, Word};

use super::{fail, Res};

/// Flatten/DontFlatten and Unroll/DontUnroll are exclusive; loop controls with parameters are
/// not used by Helios.
fn control_bits(ins: &Instruction) -> Res<()> {
    let bits = match ins.operands.last() {
        Some(Operand::SelectionControl(c)) => c.bits(),
        Some(Operand::LoopControl(c)) => c.bits(),
        _ => return fail(format!("{:?} without its control operand", ins.class.opcode)),
    };
    if bits & !0x7 != 0 || bits & 0x3 == 0x3 {
        return fail(format!("{:?} control {bits:#x}", ins.class.opcode));
    }
    Ok(())
}

fn labels(ins: &Instruction) -> Vec<Word> {
    let ids = |from: usize, step: usize| -> Vec<Word> {
        ins.operands.iter().skip(from).step_by(step).filter_map(|o| if let Operand::IdRef(id) = o { Some(*id) } else { None }).collect()
    };
    match ins.class.opcode {
        Op::Branch => ids(0, 1),
        Op::BranchConditional => ids(1, 1).into_iter().take(2).collect(),
        // selector, default, then (literal, label) pairs: every IdRef after the selector.
        Op::Switch => ids(1, 1),
        _ => Vec::new(),
    }
}

/// Immediate dominators by the iterative algorithm of Cooper, Harvey and Kennedy, over blocks
/// in order (`None`: unreachable).
fn dominators(succ: &[Vec<usize>]) -> Vec<Option<usize>> {
    let n = succ.len();
    let mut preds = vec![Vec::new(); n];
    for (b, s) in succ.iter().enumerate() {
        for &t in s {
            preds[t].push(b);
        }
    }
    // Reverse post-order numbering.
    let mut order = Vec::with_capacity(n);
    let mut seen = vec![false; n];
    let mut stack = vec![(0usize, 0usize)];
    seen[0] = true;
    while let Some((b, i)) = stack.pop() {
        if let Some(&t) = succ[b].get(i) {
            stack.push((b, i + 1));
            if !seen[t] {
                seen[t] = true;
                stack.push((t, 0));
            }
        } else {
            order.push(b);
        }
    }
    order.reverse();
    let mut rpo = vec![usize::MAX; n];
    for (i, &b) in order.iter().enumerate() {
        rpo[b] = i;
    }
    let mut idom: Vec<Option<usize>> = vec![None; n];
    idom[0] = Some(0);
    let mut changed = true;
    while changed {
        changed = false;
        for &b in order.iter().skip(1) {
            let mut new: Option<usize> = None;
            for &p in &preds[b] {
                if idom[p].is_none() {
                    continue;
                }
                new = Some(match new {
                    None => p,
                    Some(mut x) => {
                        let mut y = p;
                        while x != y {
                            while rpo[x] > rpo[y] {
                                x = idom[x].unwrap_or(0);
                            }
                            while rpo[y] > rpo[x] {
                                y = idom[y].unwrap_or(0);
                            }
                        }
                        x
                    }
                });
            }
            if new.is_some() && idom[b] != new {
                idom[b] = new;
                changed = true;
            }
        }
    }
    idom
}

/// Pre/post-order intervals of the dominator tree: `a` dominates `b` iff a's interval holds b's,
/// an O(1) query (a walk up the tree per use would be quadratic on hostile modules).
struct DomTree {
    enter: Vec<usize>,
    exit: Vec<usize>,
}

impl DomTree {
    fn new(idom: &[Option<usize>]) -> DomTree {
        let n = idom.len();
        let mut children = vec![Vec::new(); n];
        for (b, d) in idom.iter().enumerate() {
            if let Some(d) = *d {
                if d != b {
                    children[d].push(b);
                }
            }
        }
        let (mut enter, mut exit) = (vec![usize::MAX; n], vec![0; n]);
        let mut clock = 0;
        let mut stack = vec![(0usize, 0usize)];
        enter[0] = 0;
        while let Some((b, i)) = stack.pop() {
            if let Some(&c) = children[b].get(i) {
                stack.push((b, i + 1));
                clock += 1;
                enter[c] = clock;
                stack.push((c, 0));
            } else {
                clock += 1;
                exit[b] = clock;
            }
        }
        DomTree { enter, exit }
    }

    fn dominates(&self, a: usize, b: usize) -> bool {
        self.enter[a] <= self.enter[b] && self.exit[b] <= self.exit[a] && self.enter[a] != usize::MAX
    }
}

pub fn function(f: &Function) -> Res<()> {
    let index: HashMap<Word, usize> =
        f.blocks.iter().enumerate().filter_map(|(i, b)| b.label.as_ref()?.result_id.map(|l| (l, i))).collect();
    let block_of = |l: Word| index.get(&l).copied().ok_or_else(|| super::malformed(format!("%{l} is not a block of this function")));
    let mut succ = vec![Vec::new(); f.blocks.len()];
    // header -> (merge, continue target); header -> the block of its back edge.
    let mut loops: HashMap<usize, (usize, usize)> = HashMap::new();
    let mut back_edges: HashMap<usize, usize> = HashMap::new();
    let mut merges: HashMap<usize, usize> = HashMap::new();
    for (b, block) in f.blocks.iter().enumerate() {
        for ins in &block.instructions {
            match ins.class.opcode {
                Op::SelectionMerge | Op::LoopMerge => {
                    control_bits(ins)?;
                    let m = block_of(super::facts::id_at(ins, 0)?)?;
                    if m <= b || merges.insert(m, b).is_some() {
                        return fail(format!("block {m} is a merge block before its header or of two headers"));
                    }
                    if ins.class.opcode == Op::LoopMerge {
                        let c = block_of(super::facts::id_at(ins, 1)?)?;
                        if c < b || c > m {
                            return fail("a loop's continue target must lie between its header and merge".into());
                        }
                        loops.insert(b, (m, c));
                    }
                }
                Op::Phi => {
                    for p in ins.operands.iter().skip(1).step_by(2) {
                        let Operand::IdRef(l) = p else { return fail("OpPhi parent".into()) };
                        block_of(*l)?;
                    }
                }
                _ => {}
            }
            for t in labels(ins) {
                let t = block_of(t)?;
                if t <= b {
                    // The one back edge of a loop leaves its continue construct.
                    let ok = loops.get(&t).is_some_and(|&(m, c)| c <= b && b < m);
                    if !ok || back_edges.insert(t, b).is_some_and(|prev| prev != b) {
                        return fail(format!("a backward branch from block {b} to block {t} is not its loop's one back edge from the continue construct"));
                    }
                }
                succ[b].push(t);
            }
        }
    }
    if let Some(h) = loops.keys().find(|h| !back_edges.contains_key(h)) {
        return fail(format!("the loop at block {h} has no back edge"));
    }
    // Constructs are entered only through their headers: a block strictly inside a header's
    // range, or its merge block, is reached only from within that range (blocks of a construct
    // follow its header in Helios's layout, and spirv-val's structural rules imply it here).
    for (&m, &h) in &merges {
        for (b, s) in succ.iter().enumerate() {
            if s.iter().any(|&t| h < t && t <= m) && !(h <= b && b < m) {
                return fail(format!("block {b} branches into the construct of header {h} (merge {m}) from outside"));
            }
        }
    }
    // Leaving a construct: to its merge, or (break, continue) to the merge or continue target
    // of a loop around it; a continue target is entered only from its loop body.
    // Loops by their merge block and by their continue target: (header, merge).
    let mut exits: HashMap<usize, Vec<(usize, usize)>> = HashMap::new();
    for (&lh, &(lm, lc)) in &loops {
        exits.entry(lm).or_default().push((lh, lm));
        exits.entry(lc).or_default().push((lh, lm));
    }
    for (&m, &h) in &merges {
        for (b, targets) in succ.iter().enumerate().take(m).skip(h) {
            for &t in targets {
                let inside = h < t && t <= m;
                let back = t == h && loops.contains_key(&h);
                let exit = exits.get(&t).is_some_and(|ls| ls.iter().any(|&(lh, lm)| lh <= b && b < lm));
                if !(inside || back || exit) {
                    return fail(format!("block {b} leaves the construct of header {h} for block {t}"));
                }
            }
        }
    }
    let mut preds = vec![Vec::new(); succ.len()];
    for (b, s) in succ.iter().enumerate() {
        for &t in s {
            preds[t].push(b);
        }
    }
    for (&h, &(_, c)) in &loops {
        if let Some(&b) = preds[c].iter().find(|&&b| c != h && !(h <= b && b < c)) {
            return fail(format!("block {b} branches to the continue target of the loop at block {h} from outside its body"));
        }
    }
    phis(f, &preds, &index)?;
    for (&h, &b) in &back_edges {
        let (m, c) = loops[&h];
        if !post_dominates(&succ, b, c, &[h, m]) {
            return fail(format!("the back edge of the loop at block {h} (from block {b}) does not post-dominate its continue target {c}"));
        }
    }
    let idom = dominators(&succ);
    // Dead blocks (after a return or continue, say) may only branch to a merge block or to the
    // continue target of the loop they lie in: anything else would enter a construct other than
    // through its header.
    for b in (0..succ.len()).filter(|&b| idom[b].is_none()) {
        let continues = |t: usize| loops.iter().any(|(&h, &(_, c))| t == c && h < b && b < c);
        // A dead continue target (a loop that always breaks) still has its back edge.
        let back_edge = |t: usize| loops.get(&t).is_some_and(|&(_, c)| c == b);
        if let Some(&t) = succ[b].iter().find(|&&t| !merges.contains_key(&t) && !continues(t) && !back_edge(t)) {
            return fail(format!("unreachable block {b} branches into block {t}, which is no merge block or continue target of its loop"));
        }
    }
    // Blocks appear after their dominators (drivers translate in binary order).
    if let Some(b) = (0..idom.len()).find(|&b| idom[b].is_some_and(|d| d > b)) {
        return fail(format!("block {b} appears before its dominator"));
    }
    ssa(f, &idom)
}

/// A phi names each predecessor of its block exactly once.
fn phis(f: &Function, preds: &[Vec<usize>], index: &HashMap<Word, usize>) -> Res<()> {
    for (b, block) in f.blocks.iter().enumerate() {
        let mut preds = preds[b].clone();
        preds.sort_unstable();
        preds.dedup();
        for ins in block.instructions.iter().filter(|i| i.class.opcode == Op::Phi) {
            let mut parents: Vec<usize> = ins
                .operands
                .iter()
                .skip(1)
                .step_by(2)
                .map(|o| match o {
                    Operand::IdRef(l) => index.get(l).copied().ok_or_else(|| super::malformed("OpPhi parent".into())),
                    _ => fail("OpPhi parent".into()),
                })
                .collect::<Res<_>>()?;
            parents.sort_unstable();
            if parents != preds {
                return fail(format!("a phi in block {b} names blocks {parents:?}, its predecessors are {preds:?}"));
            }
        }
    }
    Ok(())
}

/// Does every path from `from` reach `b` before leaving (returning or reaching one of `exits`)?
fn post_dominates(succ: &[Vec<usize>], b: usize, from: usize, exits: &[usize]) -> bool {
    let mut seen = vec![false; succ.len()];
    let mut stack = vec![from];
    while let Some(x) = stack.pop() {
        if x == b {
            continue;
        }
        if seen[x] {
            continue;
        }
        seen[x] = true;
        if (x != from && exits.contains(&x)) || succ[x].is_empty() {
            return false;
        }
        stack.extend(succ[x].iter().copied());
    }
    true
}

/// Every use of a value defined in this function is dominated by its definition.
fn ssa(f: &Function, idom: &[Option<usize>]) -> Res<()> {
    let tree = DomTree::new(idom);
    let mut def_block: HashMap<Word, usize> = HashMap::new();
    for (b, block) in f.blocks.iter().enumerate() {
        for ins in &block.instructions {
            if let Some(id) = ins.result_id {
                def_block.insert(id, b);
            }
        }
    }
    let index: HashMap<Word, usize> =
        f.blocks.iter().enumerate().filter_map(|(i, b)| b.label.as_ref()?.result_id.map(|l| (l, i))).collect();
    for (b, block) in f.blocks.iter().enumerate() {
        if idom[b].is_none() {
            continue; // unreachable: never executed
        }
        for ins in &block.instructions {
            let phi = ins.class.opcode == Op::Phi;
            for (i, o) in ins.operands.iter().enumerate() {
                let Operand::IdRef(id) = o else { continue };
                let Some(&d) = def_block.get(id) else { continue };
                let at = if phi {
                    match ins.operands.get(i + 1) {
                        Some(Operand::IdRef(parent)) if i % 2 == 0 => index.get(parent).copied().unwrap_or(b),
                        _ => continue,
                    }
                } else {
                    b
                };
                if idom[at].is_some() && !tree.dominates(d, at) {
                    return fail(format!("%{id} is used in block {at}, which its definition in block {d} does not dominate"));
                }
            }
        }
    }
    Ok(())
}
