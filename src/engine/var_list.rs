//! [`VarList`]: the vars an op reads or writes, borrowed in whichever shape the caller has.
#![forbid(unsafe_code)]

use std::fmt;

use super::var::Var;

/// The vars an op reads or writes, borrowed: one var, a slice, array or `Vec` of vars, or of
/// var references, so a push needs neither `std::slice::from_ref` nor a `Vec` of cloned vars.
///
/// ```
/// use enginetop::engine::{Engine, EngineKind, EngineOptions, OpSpec, Var};
/// let engine = Engine::new(EngineOptions::new(EngineKind::Naive, 1)).unwrap();
/// let (a, b, c) = (engine.new_variable(), engine.new_variable(), engine.new_variable());
/// engine.push_sync(OpSpec::new("one").writes(&a), |_| Ok(())).unwrap();
/// engine.push_sync(OpSpec::new("refs").reads(&[&a, &b]).writes(&c), |_| Ok(())).unwrap();
/// let inputs = vec![a.clone(), b.clone()];
/// engine.push_sync(OpSpec::new("vec").reads(&inputs).writes(&c), |_| Ok(())).unwrap();
/// // From any iterator of vars: collect the references (a spec borrows what it names).
/// let chosen: Vec<&Var> = [&a, &b, &c].into_iter().filter(|var| var.version() > 0).collect();
/// engine.push_sync(OpSpec::new("iter").reads(&chosen).writes(&b), |_| Ok(())).unwrap();
/// assert_eq!((a.version(), b.version(), c.version()), (1, 1, 2));
/// ```
#[derive(Clone, Copy)]
pub struct VarList<'a>(Shape<'a>);

#[derive(Clone, Copy)]
enum Shape<'a> {
    Vars(&'a [Var]),
    Refs(&'a [&'a Var]),
}

impl<'a> VarList<'a> {
    /// No vars.
    pub const EMPTY: VarList<'static> = VarList(Shape::Vars(&[]));

    /// How many vars (duplicates included).
    pub fn len(&self) -> usize {
        match self.0 {
            Shape::Vars(vars) => vars.len(),
            Shape::Refs(refs) => refs.len(),
        }
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The vars, in the order given.
    pub fn iter(&self) -> impl Iterator<Item = &'a Var> + Clone + 'a {
        let (vars, refs): (&'a [Var], &'a [&'a Var]) = match self.0 {
            Shape::Vars(vars) => (vars, &[]),
            Shape::Refs(refs) => (&[], refs),
        };
        vars.iter().chain(refs.iter().copied())
    }

    /// The only var, if there is exactly one.
    #[inline]
    pub(crate) fn only(&self) -> Option<&'a Var> {
        match self.0 {
            Shape::Vars([var]) => Some(var),
            Shape::Refs([var]) => Some(var),
            _ => None,
        }
    }

    /// The first var, in the order given, for which `matches` holds (one loop over the
    /// shape the list has, where [`iter`](Self::iter) chains both).
    #[inline]
    pub(crate) fn find(&self, mut matches: impl FnMut(&Var) -> bool) -> Option<&'a Var> {
        match self.0 {
            Shape::Vars(vars) => vars.iter().find(|var| matches(var)),
            Shape::Refs(refs) => refs.iter().copied().find(|var| matches(var)),
        }
    }
}

impl Default for VarList<'_> {
    fn default() -> Self {
        VarList::EMPTY
    }
}

impl fmt::Debug for VarList<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter().map(Var::id)).finish()
    }
}

impl<'a> From<&'a Var> for VarList<'a> {
    fn from(var: &'a Var) -> Self {
        VarList(Shape::Vars(std::slice::from_ref(var)))
    }
}

impl<'a> From<&'a [Var]> for VarList<'a> {
    fn from(vars: &'a [Var]) -> Self {
        VarList(Shape::Vars(vars))
    }
}

impl<'a, const N: usize> From<&'a [Var; N]> for VarList<'a> {
    fn from(vars: &'a [Var; N]) -> Self {
        VarList(Shape::Vars(vars))
    }
}

impl<'a> From<&'a Vec<Var>> for VarList<'a> {
    fn from(vars: &'a Vec<Var>) -> Self {
        VarList(Shape::Vars(vars))
    }
}

impl<'a> From<&'a [&'a Var]> for VarList<'a> {
    fn from(refs: &'a [&'a Var]) -> Self {
        VarList(Shape::Refs(refs))
    }
}

impl<'a, const N: usize> From<&'a [&'a Var; N]> for VarList<'a> {
    fn from(refs: &'a [&'a Var; N]) -> Self {
        VarList(Shape::Refs(refs))
    }
}

impl<'a> From<&'a Vec<&'a Var>> for VarList<'a> {
    fn from(refs: &'a Vec<&'a Var>) -> Self {
        VarList(Shape::Refs(refs))
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn only_and_find_see_both_shapes() {
        let vars = [Var::new(1), Var::new(2)];
        let refs = [&vars[1]];
        assert!(VarList::from(&vars).only().is_none());
        assert_eq!(VarList::from(&vars[..1]).only().map(Var::id), Some(1));
        assert_eq!(VarList::from(&refs).only().map(Var::id), Some(2));
        assert!(VarList::EMPTY.only().is_none());
        let second = VarList::from(&vars).find(|var| var.id() == 2);
        assert_eq!(second.map(Var::id), Some(2));
        assert!(VarList::from(&refs).find(|var| var.id() == 1).is_none());
    }
}
