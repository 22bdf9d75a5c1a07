//! Expansion: blocks repeated, templates instantiated, `${...}` evaluated, giving flat lists of
//! tensors and ops that still refer to each other by name (resolution is [`super::load`]'s).
//!
//! Order: in each body (the file, a block, a template) its tensors come first, then its ops
//! and blocks in the order they appear in the file. Every loop is bounded: repeats,
//! template nesting and the total work are capped, so no input runs away.
#![forbid(unsafe_code)]

use std::collections::BTreeMap;
use std::ops::Range;

use super::error::{comma_list, LoadResult, Located, Problem};
use super::expr::{evaluate_condition, evaluate_int, interpolate, ExprError, Rng, Value, Vars};
use super::schema::{
    BlockSpec, Body, ListItem, Literal, Number, OpSpec, Sp, SpannedMap, TemplateSpec, TensorSpec,
    WorkloadFile,
};

/// Templates nested deeper than this are refused (a template that uses itself).
pub(crate) const MAX_TEMPLATE_DEPTH: usize = 16;
/// Blocks nested deeper than this are refused, counting the blocks inside the templates
/// they use (below the TOML parser's own limit of 80 tables in one header).
pub(super) const MAX_BLOCK_DEPTH: usize = 64;
/// Tensors plus ops plus list entries plus repetitions, all told.
pub(super) const MAX_WORK: u64 = 2_000_000;
/// Dimensions in a shape.
pub(crate) const MAX_RANK: usize = 8;

/// A text value and the span it came from.
pub(crate) type SpannedText = (String, Range<usize>);

/// A tensor after expansion.
#[derive(Clone, Debug)]
pub(crate) struct RawTensor {
    /// Its name.
    pub(crate) name: SpannedText,
    /// Its shape, every dimension >= 1.
    pub(crate) shape: Vec<usize>,
    /// Where the shape is written.
    pub(crate) shape_span: Range<usize>,
    /// Dtype name, if given.
    pub(crate) dtype: Option<SpannedText>,
    /// Device, if given.
    pub(crate) device: Option<SpannedText>,
    /// Init name, if given.
    pub(crate) init: Option<SpannedText>,
}

/// An op after expansion; tensors still by name.
#[derive(Clone, Debug)]
pub(super) struct RawOp {
    /// Its name.
    pub(crate) name: SpannedText,
    /// Kernel name.
    pub(crate) kernel: SpannedText,
    /// `reads`, `writes`, `also_reads`, `also_writes`.
    pub(crate) lists: [Vec<SpannedText>; 4],
    /// Device, if given.
    pub(crate) device: Option<SpannedText>,
    /// Property, if given.
    pub(crate) property: Option<SpannedText>,
    /// Priority and where it is written (the op's name when not given).
    pub(crate) priority: (i64, Range<usize>),
    /// Kernel parameters as evaluated.
    pub(crate) params: Vec<(String, Value, Range<usize>)>,
    /// Whether it belongs to a `phase = "setup"` block.
    pub(crate) setup: bool,
}

/// The names of an op's four tensor lists, in [`RawOp::lists`] order.
pub(crate) const LIST_NAMES: [&str; 4] = ["reads", "writes", "also_reads", "also_writes"];

/// Everything the file expands to.
#[derive(Debug, Default)]
pub(crate) struct Expanded {
    /// Tensors in declaration order.
    pub(crate) tensors: Vec<RawTensor>,
    /// Ops in push order.
    pub(crate) ops: Vec<RawOp>,
    /// The `default_device`, evaluated.
    pub(crate) default_device: Option<SpannedText>,
}

/// Expands `file` with the parameter values `params` (defaults already overridden).
pub(super) fn expand(
    file: &WorkloadFile,
    params: &BTreeMap<String, Value>,
) -> LoadResult<Expanded> {
    let seed = match params.get("seed") {
        Some(Value::Int(seed)) => *seed as u64,
        _ => 0,
    };
    let mut expander = Expander {
        shrink: shrink_fix(params),
        templates: &file.templates,
        rng: Rng::new(seed),
        out: Expanded::default(),
        depth: 0,
        block_depth: 0,
        setup: false,
        work: 0,
    };
    let mut vars = Vars::new(params);
    if let Some(device) = &file.default_device {
        expander.out.default_device = Some(expander.text(device, &vars)?);
    }
    expander.body(file.body(), &mut vars, true)?;
    Ok(expander.out)
}

/// How to bring the expansion under [`MAX_WORK`]: the integer parameters (what repeat
/// counts are made of) with their values, to lower with `--set`, or a block's `repeat`.
fn shrink_fix(params: &BTreeMap<String, Value>) -> String {
    let counts: Vec<String> = params
        .iter()
        .filter(|(_, value)| matches!(value, Value::Int(_)))
        .map(|(name, value)| format!("{name} = {value}"))
        .collect();
    if counts.is_empty() {
        return "shrink the workload: lower a [[block]]'s repeat, or write fewer ops and list \
                entries"
            .to_string();
    }
    format!(
        "shrink the workload: lower the parameters its repeats use with --set NAME=VALUE \
         (its integer [params]: {}), or a [[block]]'s repeat",
        comma_list(counts)
    )
}

struct Expander<'f> {
    /// [`shrink_fix`]'s advice, for the limit errors.
    shrink: String,
    templates: &'f BTreeMap<Sp<String>, Sp<TemplateSpec>>,
    rng: Rng,
    out: Expanded,
    /// Templates being expanded, outermost first.
    depth: usize,
    /// Blocks being expanded, templates' blocks included.
    block_depth: usize,
    setup: bool,
    work: u64,
}

enum Item<'f> {
    Op(&'f Sp<OpSpec>),
    Block(&'f Sp<BlockSpec>),
}

impl<'f> Expander<'f> {
    fn count_work(&mut self, span: &Range<usize>, amount: u64) -> LoadResult<()> {
        self.work = self.work.saturating_add(amount);
        if self.work <= MAX_WORK {
            return Ok(());
        }
        Err(Located::at(
            span.clone(),
            Problem::Limit {
                what: "the expansion (tensors, ops, list entries and repetitions)".to_string(),
                max: MAX_WORK,
                fix: self.shrink.clone(),
            },
        ))
    }

    fn body(&mut self, body: Body<'f>, vars: &mut Vars, top: bool) -> LoadResult<()> {
        for tensor in body.tensors {
            self.tensor(tensor, vars)?;
        }
        let mut items: Vec<(usize, Item<'f>)> = body
            .ops
            .iter()
            .map(|op| (op.span().start, Item::Op(op)))
            .chain(body.blocks.iter().map(|b| (b.span().start, Item::Block(b))))
            .collect();
        items.sort_by_key(|(start, _)| *start);
        for (_, item) in items {
            match item {
                Item::Op(op) => self.op(op, vars)?,
                Item::Block(block) if top => self.top_block(block, vars)?,
                Item::Block(block) => self.block(block, vars, false)?,
            }
        }
        Ok(())
    }

    fn top_block(&mut self, block: &'f Sp<BlockSpec>, vars: &mut Vars) -> LoadResult<()> {
        self.setup = match &block.get_ref().phase {
            None => false,
            Some(phase) => match phase.get_ref().as_str() {
                "iteration" => false,
                "setup" => true,
                other => {
                    return Err(Located::at(
                        phase.span(),
                        wrong_value("phase", other, "\"iteration\" or \"setup\""),
                    ))
                }
            },
        };
        let result = self.block(block, vars, true);
        self.setup = false;
        result
    }

    fn block(&mut self, spanned: &'f Sp<BlockSpec>, vars: &mut Vars, top: bool) -> LoadResult<()> {
        if self.block_depth >= MAX_BLOCK_DEPTH {
            return Err(Located::at(
                spanned.span(),
                blocks_too_deep(self.block_depth + 1),
            ));
        }
        self.block_depth += 1;
        let result = self.block_body(spanned, vars, top);
        self.block_depth -= 1;
        result
    }

    fn block_body(
        &mut self,
        spanned: &'f Sp<BlockSpec>,
        vars: &mut Vars,
        top: bool,
    ) -> LoadResult<()> {
        let block = spanned.get_ref();
        if let (Some(phase), false) = (&block.phase, top) {
            return Err(Located::at(
                phase.span(),
                wrong_value(
                    "phase",
                    phase.get_ref(),
                    "no phase here: only top-level blocks have one",
                ),
            ));
        }
        if let Some(when) = &block.when {
            let enabled = evaluate_condition(when.get_ref(), vars, &mut self.rng)
                .map_err(|reason| expression_error(when, reason))?;
            if !enabled {
                return Ok(());
            }
        }
        let repeat = match &block.repeat {
            Some(repeat) => self.count(repeat, vars, "repeat")?,
            None => 1,
        };
        let index = match &block.index {
            Some(index) => identifier(index, "block index")?,
            None => "i".to_string(),
        };
        match &block.use_template {
            Some(name) => self.use_template(spanned, name, repeat, &index, vars),
            None => {
                if let Some((key, _)) = block.with.iter().next() {
                    return Err(Located::at(
                        key.span(),
                        wrong_value(
                            "with",
                            "given without use",
                            "with only together with use = \"TEMPLATE\"",
                        ),
                    ));
                }
                for i in 0..repeat {
                    self.count_work(&spanned.span(), 1)?;
                    vars.push(&index, Value::Int(i));
                    let result = self.body(block.body(), vars, false);
                    vars.pop();
                    result?;
                }
                Ok(())
            }
        }
    }

    fn use_template(
        &mut self,
        block: &'f Sp<BlockSpec>,
        name: &Sp<String>,
        repeat: i64,
        index: &str,
        vars: &mut Vars,
    ) -> LoadResult<()> {
        let spec = block.get_ref();
        if !(spec.tensor.is_empty() && spec.op.is_empty() && spec.block.is_empty()) {
            return Err(Located::at(
                block.span(),
                wrong_value(
                    "a block with use",
                    "also listing its own tensors, ops or blocks",
                    "either use = \"TEMPLATE\" or an inline body; move the inline part to its own block",
                ),
            ));
        }
        let templates = self.templates;
        let Some((_, template)) = templates.get_key_value(name.get_ref().as_str()) else {
            let known = comma_list(templates.keys().map(|key| key.get_ref()));
            return Err(Located::at(
                name.span(),
                Problem::UnknownTemplate {
                    name: name.get_ref().clone(),
                    known: if known.is_empty() {
                        "none declared".into()
                    } else {
                        known
                    },
                },
            ));
        };
        check_template_args(name, template.get_ref(), &spec.with, &block.span())?;
        if self.depth >= MAX_TEMPLATE_DEPTH {
            return Err(Located::at(
                name.span(),
                Problem::TemplateDepth {
                    template: name.get_ref().clone(),
                    max: MAX_TEMPLATE_DEPTH,
                },
            ));
        }
        for i in 0..repeat {
            self.count_work(&block.span(), 1)?;
            vars.push(index, Value::Int(i));
            let args = self.args(&spec.with, vars);
            vars.pop();
            let mut inner = vars.fresh();
            for (arg, value) in args? {
                inner.push(&arg, value);
            }
            self.depth += 1;
            let result = self.body(template.get_ref().body(), &mut inner, false);
            self.depth -= 1;
            result?;
        }
        Ok(())
    }

    fn args(&mut self, with: &SpannedMap, vars: &Vars) -> LoadResult<Vec<(String, Value)>> {
        with.iter()
            .map(|(key, literal)| Ok((key.get_ref().clone(), self.literal(literal, vars)?)))
            .collect()
    }

    fn tensor(&mut self, spanned: &Sp<TensorSpec>, vars: &Vars) -> LoadResult<()> {
        self.count_work(&spanned.span(), 1)?;
        let spec = spanned.get_ref();
        let name = self.name(&spec.name, vars, "tensor")?;
        let shape = self.shape(&spec.shape, &name.0, vars)?;
        let tensor = RawTensor {
            shape,
            shape_span: spec.shape.span(),
            dtype: self.optional_text(&spec.dtype, vars)?,
            device: self.optional_text(&spec.device, vars)?,
            init: self.optional_text(&spec.init, vars)?,
            name,
        };
        self.out.tensors.push(tensor);
        Ok(())
    }

    fn shape(
        &mut self,
        shape: &Sp<Vec<Sp<Number>>>,
        tensor: &str,
        vars: &Vars,
    ) -> LoadResult<Vec<usize>> {
        let dims = shape.get_ref();
        if dims.len() > MAX_RANK {
            return Err(Located::at(
                shape.span(),
                Problem::BadShape {
                    tensor: tensor.to_string(),
                    shape: format!("of rank {}", dims.len()),
                    detail: format!("expected at most {MAX_RANK} dimensions"),
                },
            ));
        }
        let mut evaluated = Vec::with_capacity(dims.len());
        for dim in dims {
            let value = self.number(dim, vars)?;
            match usize::try_from(value) {
                Ok(size) if size >= 1 => evaluated.push(size),
                _ => {
                    return Err(Located::at(
                        dim.span(),
                        Problem::BadShape {
                            tensor: tensor.to_string(),
                            shape: format!("dimension {} = {value}", evaluated.len()),
                            detail: "expected every dimension >= 1".to_string(),
                        },
                    ))
                }
            }
        }
        Ok(evaluated)
    }

    fn op(&mut self, spanned: &Sp<OpSpec>, vars: &mut Vars) -> LoadResult<()> {
        self.count_work(&spanned.span(), 1)?;
        let spec = spanned.get_ref();
        let name = self.name(&spec.name, vars, "op")?;
        let lists = [
            self.list(&spec.reads, vars)?,
            self.list(&spec.writes, vars)?,
            self.list(&spec.also_reads, vars)?,
            self.list(&spec.also_writes, vars)?,
        ];
        let priority = match &spec.priority {
            Some(priority) => (self.number(priority, vars)?, priority.span()),
            None => (0, name.1.clone()),
        };
        let mut params = Vec::with_capacity(spec.params.len());
        for (key, literal) in &spec.params {
            params.push((
                key.get_ref().clone(),
                self.literal(literal, vars)?,
                literal.span(),
            ));
        }
        let op = RawOp {
            kernel: (spec.kernel.get_ref().clone(), spec.kernel.span()),
            device: self.optional_text(&spec.device, vars)?,
            property: self.optional_text(&spec.property, vars)?,
            lists,
            priority,
            params,
            setup: self.setup,
            name,
        };
        self.out.ops.push(op);
        Ok(())
    }

    fn list(&mut self, items: &[Sp<ListItem>], vars: &mut Vars) -> LoadResult<Vec<SpannedText>> {
        let mut names = Vec::with_capacity(items.len());
        for item in items {
            self.count_work(&item.span(), 1)?;
            match item.get_ref() {
                ListItem::Name(text) => {
                    let value = self.evaluate(text, &item.span(), vars)?;
                    names.push((value.to_string(), item.span()));
                }
                ListItem::Each(each) => {
                    let count = self.count_at(&each.repeat, &item.span(), vars, "repeat")?;
                    let index = each.index.clone().unwrap_or_else(|| "j".to_string());
                    if !is_identifier(&index) {
                        return Err(Located::at(
                            item.span(),
                            bad_identifier(&index, "list index"),
                        ));
                    }
                    for j in 0..count {
                        self.count_work(&item.span(), 1)?;
                        vars.push(&index, Value::Int(j));
                        let value = self.evaluate(&each.name, &item.span(), vars);
                        vars.pop();
                        names.push((value?.to_string(), item.span()));
                    }
                }
            }
        }
        Ok(names)
    }

    fn name(
        &mut self,
        text: &Sp<String>,
        vars: &Vars,
        kind: &'static str,
    ) -> LoadResult<SpannedText> {
        let (name, span) = self.text(text, vars)?;
        let reason = if name.is_empty() {
            Some("is empty: expected a non-empty name")
        } else if name.chars().count() > 200 {
            Some("is longer than 200 characters: expected a shorter name")
        } else if name.chars().any(|c| c.is_whitespace() || c.is_control()) {
            Some("has whitespace or control characters: expected none (use _ or -)")
        } else {
            None
        };
        match reason {
            Some(reason) => Err(Located::at(span, Problem::BadName { kind, name, reason })),
            None => Ok((name, span)),
        }
    }

    fn optional_text(
        &mut self,
        text: &Option<Sp<String>>,
        vars: &Vars,
    ) -> LoadResult<Option<SpannedText>> {
        text.as_ref().map(|text| self.text(text, vars)).transpose()
    }

    fn text(&mut self, text: &Sp<String>, vars: &Vars) -> LoadResult<SpannedText> {
        let value = self.value(text, vars)?;
        Ok((value.to_string(), text.span()))
    }

    fn value(&mut self, text: &Sp<String>, vars: &Vars) -> LoadResult<Value> {
        self.evaluate(text.get_ref(), &text.span(), vars)
    }

    fn evaluate(&mut self, text: &str, span: &Range<usize>, vars: &Vars) -> LoadResult<Value> {
        interpolate(text, vars, &mut self.rng).map_err(|reason| {
            Located::at(
                span.clone(),
                Problem::Expression {
                    text: text.to_string(),
                    reason: Box::new(reason),
                },
            )
        })
    }

    fn literal(&mut self, literal: &Sp<Literal>, vars: &Vars) -> LoadResult<Value> {
        match literal.get_ref() {
            Literal::Int(value) => Ok(Value::Int(*value)),
            Literal::Float(value) => Ok(Value::Float(*value)),
            Literal::Bool(value) => Ok(Value::Bool(*value)),
            Literal::Text(text) => self.evaluate(text, &literal.span(), vars),
        }
    }

    fn number(&mut self, number: &Sp<Number>, vars: &Vars) -> LoadResult<i64> {
        self.number_at(number.get_ref(), &number.span(), vars)
    }

    fn number_at(&mut self, number: &Number, span: &Range<usize>, vars: &Vars) -> LoadResult<i64> {
        match number {
            Number::Int(value) => Ok(*value),
            Number::Expr(text) => evaluate_int(text, vars, &mut self.rng).map_err(|reason| {
                Located::at(
                    span.clone(),
                    Problem::Expression {
                        text: text.clone(),
                        reason: Box::new(reason),
                    },
                )
            }),
        }
    }

    fn count(&mut self, number: &Sp<Number>, vars: &Vars, what: &str) -> LoadResult<i64> {
        self.count_at(number.get_ref(), &number.span(), vars, what)
    }

    /// A repetition count: an integer >= 0.
    fn count_at(
        &mut self,
        number: &Number,
        span: &Range<usize>,
        vars: &Vars,
        what: &str,
    ) -> LoadResult<i64> {
        let value = self.number_at(number, span, vars)?;
        if value < 0 {
            return Err(Located::at(
                span.clone(),
                wrong_value(what, &value.to_string(), "a count >= 0"),
            ));
        }
        if value as u64 > MAX_WORK {
            return Err(Located::at(
                span.clone(),
                Problem::Limit {
                    what: format!("{what} = {value}"),
                    max: MAX_WORK,
                    fix: self.shrink.clone(),
                },
            ));
        }
        Ok(value)
    }
}

fn check_template_args(
    name: &Sp<String>,
    template: &TemplateSpec,
    with: &SpannedMap,
    block_span: &Range<usize>,
) -> LoadResult<()> {
    let declared: Vec<&str> = template
        .args
        .iter()
        .map(|arg| arg.get_ref().as_str())
        .collect();
    let listed = if declared.is_empty() {
        "none".to_string()
    } else {
        declared.join(", ")
    };
    for key in with.keys() {
        if !declared.contains(&key.get_ref().as_str()) {
            return Err(Located::at(
                key.span(),
                Problem::TemplateArgs {
                    template: name.get_ref().clone(),
                    detail: format!(
                        "has no argument {:?}: expected its args ({listed})",
                        key.get_ref()
                    ),
                },
            ));
        }
    }
    for arg in &template.args {
        if !is_identifier(arg.get_ref()) {
            return Err(Located::at(
                arg.span(),
                bad_identifier(arg.get_ref(), "template argument"),
            ));
        }
        if !with.contains_key(arg.get_ref().as_str()) {
            return Err(Located::at(
                block_span.clone(),
                Problem::TemplateArgs {
                    template: name.get_ref().clone(),
                    detail: format!(
                        "needs argument {:?}: expected with = {{ {} }}",
                        arg.get_ref(),
                        declared
                            .iter()
                            .map(|a| format!("{a} = ..."))
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                },
            ));
        }
    }
    Ok(())
}

/// `[A-Za-z_][A-Za-z0-9_]*`.
pub(crate) fn is_identifier(text: &str) -> bool {
    let mut chars = text.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

fn identifier(text: &Sp<String>, what: &'static str) -> LoadResult<String> {
    if is_identifier(text.get_ref()) {
        return Ok(text.get_ref().clone());
    }
    Err(Located::at(
        text.span(),
        bad_identifier(text.get_ref(), what),
    ))
}

fn bad_identifier(text: &str, what: &'static str) -> Problem {
    Problem::BadName {
        kind: what,
        name: text.to_string(),
        reason: "is not an identifier: expected letters, digits and _ (not starting with a digit)",
    }
}

/// Blocks nested `depth` deep, past [`MAX_BLOCK_DEPTH`].
pub(crate) fn blocks_too_deep(depth: usize) -> Problem {
    Problem::TooDeep {
        what: "blocks".to_string(),
        depth: depth.to_string(),
        max: MAX_BLOCK_DEPTH,
        fix: "a template's blocks count from the block that uses it; flatten them: a block's \
              repeat or a generated operand list usually replaces a level",
    }
}

fn wrong_value(what: &str, found: &str, expected: &str) -> Problem {
    Problem::WrongValue {
        what: what.to_string(),
        found: format!("{found:?}"),
        expected: expected.to_string(),
    }
}

fn expression_error(text: &Sp<String>, reason: ExprError) -> Located {
    Located::at(
        text.span(),
        Problem::Expression {
            text: text.get_ref().clone(),
            reason: Box::new(reason),
        },
    )
}
