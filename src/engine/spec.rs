//! [`OpSpec`]: what a push says about its op (name, context, vars, property, priority).
//!
//! Above the op block (`opr.rs`, whose header a spec fills) and below what pushes: the bulk
//! batches (`bulk.rs`) and the handle (`handle.rs`).
#![forbid(unsafe_code)]

use super::name::OpName;
use super::opr::OpHeader;
use super::types::{Context, FnProperty};
use super::var_list::VarList;

/// What to push: name, context, vars, property, priority.
///
/// ```
/// use enginetop::engine::{Context, FnProperty, OpSpec};
/// let spec = OpSpec::new("copy").ctx(Context::cpu(0)).prop(FnProperty::CopyToGpu).priority(3);
/// assert_eq!(spec.name.as_str(), "copy");
/// ```
#[derive(Clone, Copy, Debug)]
pub struct OpSpec<'a> {
    /// The op's name (errors and the profiler use it).
    pub name: OpName,
    /// Where it runs (default `cpu0`).
    pub ctx: Context,
    /// Vars it reads.
    pub reads: VarList<'a>,
    /// Vars it writes.
    pub writes: VarList<'a>,
    /// What kind of op it is (default `Normal`).
    pub prop: FnProperty,
    /// Its priority (only the priority pool orders by it; higher first).
    pub priority: i32,
}

impl<'a> OpSpec<'a> {
    /// An op named `name` on `cpu0` with no vars, `Normal`, priority 0.
    pub fn new(name: impl Into<OpName>) -> Self {
        OpSpec {
            name: name.into(),
            ctx: Context::cpu(0),
            reads: VarList::EMPTY,
            writes: VarList::EMPTY,
            prop: FnProperty::Normal,
            priority: 0,
        }
    }

    /// Sets the context.
    pub fn ctx(mut self, ctx: Context) -> Self {
        self.ctx = ctx;
        self
    }

    /// Sets the vars read: one var, or a slice, array or `Vec` of vars or of `&Var`.
    pub fn reads(mut self, reads: impl Into<VarList<'a>>) -> Self {
        self.reads = reads.into();
        self
    }

    /// Sets the vars written: one var, or a slice, array or `Vec` of vars or of `&Var`.
    pub fn writes(mut self, writes: impl Into<VarList<'a>>) -> Self {
        self.writes = writes.into();
        self
    }

    /// Sets the property.
    pub fn prop(mut self, prop: FnProperty) -> Self {
        self.prop = prop;
        self
    }

    /// Sets the priority.
    pub fn priority(mut self, priority: i32) -> Self {
        self.priority = priority;
        self
    }

    /// The op block's header for this spec.
    pub(crate) fn header(&self) -> OpHeader {
        OpHeader {
            ctx: self.ctx,
            prop: self.prop,
            priority: self.priority,
            name: self.name,
            is_wait: false,
        }
    }
}
