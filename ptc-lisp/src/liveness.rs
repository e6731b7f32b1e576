//! Last-use analysis: turns the final read of a frame slot into a move, so a collection threaded
//! through `reduce`/`loop` accumulators stays uniquely owned and `assoc`/`conj` update in place
//! instead of copying (see docs/performance.md, "keep the accumulator unique").
//!
//! The pass walks each function body backwards in evaluation order with the set of slots still
//! needed later. Inside loops (`loop`, `for`, `doseq`, and the function body itself when it
//! recurs), every slot bound outside the loop stays live, because the body runs again.

use crate::ast::{ForClause, Node};

type Live = Vec<bool>;

pub(crate) fn mark_moves(node: &mut Node, n_slots: usize) {
    let mut live = vec![false; n_slots];
    walk(node, &mut live);
}

fn union(a: &mut Live, b: &Live) {
    for (x, y) in a.iter_mut().zip(b.iter()) {
        *x |= *y;
    }
}

/// Slots below `first` referenced anywhere inside `node` (they must survive loop iterations).
fn outer_uses(node: &Node, first: usize, live: &mut Live) {
    let mut stack: Vec<&Node> = vec![node];
    while let Some(n) = stack.pop() {
        match n {
            Node::Local(s) | Node::Move(s) => {
                if *s < first && *s < live.len() {
                    live[*s] = true;
                }
            }
            Node::Fn(_, caps) => {
                for c in caps {
                    if let crate::ast::CapSrc::Local(s) = c
                        && *s < first
                        && *s < live.len()
                    {
                        live[*s] = true;
                    }
                }
            }
            _ => children(n, &mut stack),
        }
    }
}

fn children<'a>(n: &'a Node, out: &mut Vec<&'a Node>) {
    match n {
        Node::If(a, b, c) => {
            out.push(a);
            out.push(b);
            out.push(c);
        }
        Node::Do(v)
        | Node::And(v)
        | Node::Or(v)
        | Node::MakeVec(v)
        | Node::MakeSet(v)
        | Node::Recur(v) => out.extend(v.iter()),
        Node::Let(b, body) => {
            out.extend(b.iter().map(|b| &b.init));
            out.push(body);
        }
        Node::Loop { binds, body, .. } => {
            out.extend(binds.iter().map(|b| &b.init));
            out.push(body);
        }
        Node::Def { value, .. } => out.push(value),
        Node::Call(f, args, _) => {
            out.push(f);
            out.extend(args.iter());
        }
        Node::CallBuiltin(_, args, _) => out.extend(args.iter()),
        Node::BinOp { a, b, .. } => {
            out.push(a);
            out.push(b);
        }
        Node::KwGet(_, t, d) => {
            out.push(t);
            if let Some(d) = d {
                out.push(d);
            }
        }
        Node::Cond(clauses) => {
            for (t, x) in clauses {
                out.push(t);
                out.push(x);
            }
        }
        Node::Case(e, t, d) => {
            out.push(e);
            out.extend(t.iter().map(|(_, n)| n));
            out.push(d);
        }
        Node::For { clauses, body, .. } => {
            for c in clauses {
                match c {
                    ForClause::Each { coll, binds, .. } => {
                        out.push(coll);
                        out.extend(binds.iter().map(|b| &b.init));
                    }
                    ForClause::Let(b) => out.extend(b.iter().map(|b| &b.init)),
                    ForClause::When(n) | ForClause::While(n) => out.push(n),
                }
            }
            out.push(body);
        }
        Node::MakeMap(pairs) => {
            for (k, v) in pairs {
                out.push(k);
                out.push(v);
            }
        }
        Node::Nth(a, _)
        | Node::RestFrom(a, _)
        | Node::Return(a)
        | Node::Fail(a, _)
        | Node::Memo(a, _) => out.push(a),
        Node::MapGet(a, _, d) => {
            out.push(a);
            if let Some(d) = d {
                out.push(d);
            }
        }
        _ => {}
    }
}

/// Processes `node` given `live` = slots needed after it; leaves `live` = slots needed before it.
fn walk(node: &mut Node, live: &mut Live) {
    match node {
        Node::Local(s) => {
            let s = *s;
            if s < live.len() && !live[s] {
                *node = Node::Move(s);
            }
            if s < live.len() {
                live[s] = true;
            }
        }
        Node::Move(s) => {
            if *s < live.len() {
                live[*s] = true;
            }
        }
        Node::Fn(_, caps) => {
            for c in caps.iter() {
                if let crate::ast::CapSrc::Local(s) = c
                    && *s < live.len()
                {
                    live[*s] = true;
                }
            }
        }
        Node::If(c, t, e) => {
            let mut le = live.clone();
            walk(e, &mut le);
            walk(t, live);
            union(live, &le);
            walk(c, live);
        }
        Node::Cond(clauses) => {
            // Clause i's body runs after tests 0..=i; later tests run only if it does not.
            let after = live.clone();
            let mut acc = after.clone();
            for (test, then) in clauses.iter_mut().rev() {
                let mut l = after.clone();
                walk(then, &mut l);
                union(&mut l, &acc);
                walk(test, &mut l);
                acc = l;
            }
            *live = acc;
        }
        Node::Case(e, table, d) => {
            let after = live.clone();
            let mut acc = after.clone();
            let mut ld = after.clone();
            walk(d, &mut ld);
            union(&mut acc, &ld);
            for (_, n) in table.iter_mut() {
                let mut l = after.clone();
                walk(n, &mut l);
                union(&mut acc, &l);
            }
            *live = acc;
            walk(e, live);
        }
        Node::Do(v) | Node::MakeVec(v) | Node::MakeSet(v) => {
            for n in v.iter_mut().rev() {
                walk(n, live);
            }
        }
        Node::And(v) | Node::Or(v) => {
            // Later operands may not run, so each one sees the union of what follows.
            for n in v.iter_mut().rev() {
                let after = live.clone();
                walk(n, live);
                union(live, &after);
            }
        }
        Node::Recur(v) => {
            for n in v.iter_mut().rev() {
                walk(n, live);
            }
        }
        Node::Let(binds, body) => {
            walk(body, live);
            for b in binds.iter_mut().rev() {
                walk(&mut b.init, live);
            }
        }
        Node::Loop {
            binds,
            first_slot,
            body,
            ..
        } => {
            let mut inv = vec![false; live.len()];
            outer_uses(body, *first_slot, &mut inv);
            union(live, &inv);
            // After a `recur` only the loop-invariant outer slots (now in `live`) matter: the loop's
            // own slots are rebound, so reads of them before the jump may move.
            walk(body, live);
            for b in binds.iter_mut().rev() {
                walk(&mut b.init, live);
            }
        }
        Node::For {
            clauses,
            first_slot,
            body,
            ..
        } => {
            let mut inv = vec![false; live.len()];
            outer_uses(body, *first_slot, &mut inv);
            for c in clauses.iter() {
                match c {
                    ForClause::Each { coll, binds, .. } => {
                        outer_uses(coll, *first_slot, &mut inv);
                        for b in binds {
                            outer_uses(&b.init, *first_slot, &mut inv);
                        }
                    }
                    ForClause::Let(b) => {
                        for b in b {
                            outer_uses(&b.init, *first_slot, &mut inv);
                        }
                    }
                    ForClause::When(n) | ForClause::While(n) => {
                        outer_uses(n, *first_slot, &mut inv)
                    }
                }
            }
            // Everything inside a comprehension runs repeatedly, so nothing in it becomes a move
            // (its nodes are left as plain reads) and every outer slot it reads stays live.
            union(live, &inv);
        }
        Node::Def { value, .. } => walk(value, live),
        Node::Call(f, args, _) => {
            for a in args.iter_mut().rev() {
                walk(a, live);
            }
            walk(f, live);
        }
        Node::CallBuiltin(_, args, _) => {
            for a in args.iter_mut().rev() {
                walk(a, live);
            }
        }
        Node::BinOp { a, b, .. } => {
            walk(b, live);
            walk(a, live);
        }
        Node::KwGet(_, t, d) => {
            if let Some(d) = d {
                let after = live.clone();
                walk(d, live);
                union(live, &after);
            }
            walk(t, live);
        }
        Node::MakeMap(pairs) => {
            for (k, v) in pairs.iter_mut().rev() {
                walk(v, live);
                walk(k, live);
            }
        }
        Node::Nth(a, _)
        | Node::RestFrom(a, _)
        | Node::Return(a)
        | Node::Fail(a, _)
        | Node::Memo(a, _) => walk(a, live),
        Node::MapGet(a, _, d) => {
            if let Some(d) = d {
                let after = live.clone();
                walk(d, live);
                union(live, &after);
            }
            walk(a, live);
        }
        Node::Const(_) | Node::Capture(_) | Node::SelfRef | Node::Global(..) | Node::Data(..) => {}
    }
}
