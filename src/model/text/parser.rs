//! Text → `ModelProto`: a recursive-descent parser for ONNX's textual syntax, with the
//! extensions the printer uses (see the module docs of `text`).
//!
//! It accepts what `onnx.printer.to_text` prints and what ONNX's parser accepts, reports the
//! first error with the span of the offending token, never panics, and stops nesting graphs and
//! types at [`MAX_NESTING`] levels.

use std::fmt;
use std::ops::Range;

use bytes::Bytes;
use miette::{Diagnostic, LabeledSpan, SourceSpan};

use super::MAX_NESTING;
use super::tensor::{self, Store};
use crate::model::proto::attribute_proto::AttributeType;
use crate::model::proto::tensor_shape_proto::{Dimension, dimension};
use crate::model::proto::type_proto;
use crate::model::proto::{
    AttributeProto, FunctionProto, GraphProto, ModelProto, NodeProto, OperatorSetIdProto,
    SparseTensorProto, StringStringEntryProto, TensorProto, TensorShapeProto, TypeProto,
    ValueInfoProto,
};

/// Parses a model in ONNX's textual syntax.
///
/// The error carries no source text: attach it for rendering with
/// `miette::Report::new(err).with_source_code(text.to_owned())`.
pub fn parse_model(text: &str) -> Result<ModelProto> {
    let mut p = Parser {
        src: text,
        b: text.as_bytes(),
        pos: 0,
        depth: 0,
    };
    p.model()
}

/// What went wrong; each kind has its own diagnostic code.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ParseErrorKind {
    /// A token other than the one the grammar needs here.
    Unexpected,
    /// A string literal without its closing quote, or with a bad escape.
    BadString,
    /// A number that does not parse or does not fit its type.
    BadNumber,
    /// A type name the syntax does not know.
    UnknownType,
    /// A header key other than the known ones.
    UnknownKeyword,
    /// An attribute value that does not match its declared type.
    BadAttribute,
    /// A tensor whose type or data cannot be a tensor's.
    BadTensor,
    /// Graphs or types nested deeper than [`MAX_NESTING`].
    TooDeep,
}

impl ParseErrorKind {
    fn code(self) -> &'static str {
        match self {
            Self::Unexpected => "onnx_lint::text::unexpected_token",
            Self::BadString => "onnx_lint::text::bad_string",
            Self::BadNumber => "onnx_lint::text::bad_number",
            Self::UnknownType => "onnx_lint::text::unknown_type",
            Self::UnknownKeyword => "onnx_lint::text::unknown_keyword",
            Self::BadAttribute => "onnx_lint::text::bad_attribute",
            Self::BadTensor => "onnx_lint::text::bad_tensor",
            Self::TooDeep => "onnx_lint::text::too_deep",
        }
    }
}

/// A syntax error in a model's text, with the span of the offending token.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ParseError {
    pub kind: ParseErrorKind,
    pub message: String,
    pub span: SourceSpan,
}

impl Diagnostic for ParseError {
    fn code<'a>(&'a self) -> Option<Box<dyn fmt::Display + 'a>> {
        Some(Box::new(self.kind.code()))
    }

    fn labels(&self) -> Option<Box<dyn Iterator<Item = LabeledSpan> + '_>> {
        Some(Box::new(std::iter::once(LabeledSpan::new_with_span(
            Some("here".to_owned()),
            self.span,
        ))))
    }
}

type Result<T> = std::result::Result<T, ParseError>;

/// An attribute or tensor literal.
enum Lit {
    Int(String),
    Float(String),
    Str,
}

struct Parser<'a> {
    src: &'a str,
    b: &'a [u8],
    pos: usize,
    depth: usize,
}

impl Parser<'_> {
    // ---- lexing -------------------------------------------------------------------------

    fn ws(&mut self) {
        while let Some(&c) = self.b.get(self.pos) {
            if c.is_ascii_whitespace() || c == 0x0b {
                self.pos += 1;
            } else if c == b'#' {
                while let Some(&c) = self.b.get(self.pos) {
                    if c == b'\n' {
                        break;
                    }
                    self.pos += 1;
                }
            } else {
                break;
            }
        }
    }

    fn peek(&mut self) -> Option<u8> {
        self.ws();
        self.b.get(self.pos).copied()
    }

    fn peek_at(&self, offset: usize) -> Option<u8> {
        self.b.get(self.pos + offset).copied()
    }

    fn eat(&mut self, c: u8) -> bool {
        if self.peek() == Some(c) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    fn expect(&mut self, c: u8, what: &str) -> Result<()> {
        if self.eat(c) {
            Ok(())
        } else {
            Err(self.unexpected(what))
        }
    }

    fn at_end(&mut self) -> bool {
        self.peek().is_none()
    }

    /// The span of the token at the current position (empty at the end of input).
    fn token(&mut self) -> Range<usize> {
        self.ws();
        let start = self.pos;
        let Some(&c) = self.b.get(start) else {
            return start..start;
        };
        let mut end = start + 1;
        if c.is_ascii_alphanumeric() || c == b'_' || c == b'-' {
            while self
                .b
                .get(end)
                .is_some_and(|c| c.is_ascii_alphanumeric() || *c == b'_' || *c == b'.')
            {
                end += 1;
            }
        } else if c == b'"' {
            while let Some(&d) = self.b.get(end) {
                end += 1;
                if d == b'"' || d == b'\n' {
                    break;
                }
            }
        }
        while !self.src.is_char_boundary(end) && end < self.b.len() {
            end += 1;
        }
        start..end
    }

    fn error_at(&self, kind: ParseErrorKind, message: String, range: Range<usize>) -> ParseError {
        ParseError {
            kind,
            message,
            span: SourceSpan::from(range),
        }
    }

    fn error(&mut self, kind: ParseErrorKind, message: String) -> ParseError {
        let range = self.token();
        self.error_at(kind, message, range)
    }

    fn unexpected(&mut self, what: &str) -> ParseError {
        let range = self.token();
        let found = match self.src.get(range.clone()) {
            None | Some("") => "the end of the input".to_owned(),
            Some(t) => format!("`{}`", t.chars().take(40).collect::<String>()),
        };
        self.error_at(
            ParseErrorKind::Unexpected,
            format!("expected {what}, found {found}"),
            range,
        )
    }

    fn ident_opt(&mut self) -> Option<&str> {
        self.ws();
        let start = self.pos;
        let first = self.b.get(start)?;
        if !(first.is_ascii_alphabetic() || *first == b'_') {
            return None;
        }
        let mut end = start + 1;
        while self
            .b
            .get(end)
            .is_some_and(|c| c.is_ascii_alphanumeric() || *c == b'_')
        {
            end += 1;
        }
        self.pos = end;
        self.src.get(start..end)
    }

    fn peek_ident(&mut self) -> Option<&str> {
        let save = self.pos;
        let start = {
            self.ws();
            self.pos
        };
        let end = self.ident_opt().map(str::len).map(|n| start + n);
        self.pos = save;
        end.and_then(|end| self.src.get(start..end))
    }

    fn ident(&mut self, what: &str) -> Result<String> {
        match self.ident_opt() {
            Some(s) => Ok(s.to_owned()),
            None => Err(self.unexpected(what)),
        }
    }

    /// A string literal's bytes, escapes resolved.
    fn string(&mut self) -> Result<Vec<u8>> {
        let start = self.token().start;
        if !self.eat(b'"') {
            return Err(self.unexpected("a string"));
        }
        let mut out = Vec::new();
        loop {
            let Some(&c) = self.b.get(self.pos) else {
                return Err(self.error_at(
                    ParseErrorKind::BadString,
                    "unterminated string".to_owned(),
                    start..self.pos,
                ));
            };
            self.pos += 1;
            match c {
                b'"' => return Ok(out),
                b'\\' => {
                    let Some(&e) = self.b.get(self.pos) else {
                        continue;
                    };
                    self.pos += 1;
                    match e {
                        b'n' => out.push(b'\n'),
                        b'r' => out.push(b'\r'),
                        b't' => out.push(b'\t'),
                        b'x' => {
                            let hex = self
                                .src
                                .get(self.pos..self.pos + 2)
                                .and_then(|h| u8::from_str_radix(h, 16).ok());
                            let Some(v) = hex else {
                                return Err(self.error_at(
                                    ParseErrorKind::BadString,
                                    "`\\x` must be followed by two hex digits".to_owned(),
                                    self.pos - 2..self.pos,
                                ));
                            };
                            out.push(v);
                            self.pos += 2;
                        }
                        other => out.push(other),
                    }
                }
                other => out.push(other),
            }
        }
    }

    fn utf8(&self, bytes: Vec<u8>, start: usize) -> Result<String> {
        String::from_utf8(bytes).map_err(|_| {
            self.error_at(
                ParseErrorKind::BadString,
                "this name is not valid UTF-8".to_owned(),
                start..self.pos,
            )
        })
    }

    fn string_utf8(&mut self) -> Result<String> {
        let start = self.token().start;
        let bytes = self.string()?;
        self.utf8(bytes, start)
    }

    /// A name: an identifier or a string.
    fn qid(&mut self, what: &str) -> Result<String> {
        if self.peek() == Some(b'"') {
            self.string_utf8()
        } else {
            self.ident(what)
        }
    }

    fn literal(&mut self) -> Result<(Lit, Range<usize>)> {
        let range = self.token();
        if self.peek() == Some(b'"') {
            self.string()?;
            return Ok((Lit::Str, range.start..self.pos));
        }
        let start = self.pos;
        let mut end = start;
        if self.b.get(end) == Some(&b'-') {
            end += 1;
        }
        if self.b.get(end).is_some_and(u8::is_ascii_alphabetic) {
            while self.b.get(end).is_some_and(u8::is_ascii_alphabetic) {
                end += 1;
            }
            let word = self.src.get(start..end).unwrap_or_default();
            let bare = word.trim_start_matches('-').to_ascii_lowercase();
            if matches!(bare.as_str(), "nan" | "inf" | "infinity") {
                self.pos = end;
                return Ok((Lit::Float(word.to_owned()), start..end));
            }
            return Err(self.unexpected("a number"));
        }
        let digits_from = end;
        while self.b.get(end).is_some_and(u8::is_ascii_digit) {
            end += 1;
        }
        if end == digits_from {
            return Err(self.unexpected("a value"));
        }
        let mut float = false;
        if self.b.get(end) == Some(&b'.') {
            float = true;
            end += 1;
            while self.b.get(end).is_some_and(u8::is_ascii_digit) {
                end += 1;
            }
        }
        if matches!(self.b.get(end), Some(b'e' | b'E')) {
            float = true;
            end += 1;
            if matches!(self.b.get(end), Some(b'+' | b'-')) {
                end += 1;
            }
            let exp_from = end;
            while self.b.get(end).is_some_and(u8::is_ascii_digit) {
                end += 1;
            }
            if end == exp_from {
                return Err(self.error_at(
                    ParseErrorKind::BadNumber,
                    "exponent without digits".to_owned(),
                    start..end,
                ));
            }
        }
        self.pos = end;
        let text = self.src.get(start..end).unwrap_or_default().to_owned();
        Ok((
            if float {
                Lit::Float(text)
            } else {
                Lit::Int(text)
            },
            start..end,
        ))
    }

    fn int(&mut self) -> Result<i64> {
        match self.literal()? {
            (Lit::Int(t), r) => parse_i64(&t).ok_or_else(|| self.bad_number(&t, "int64", r)),
            (_, r) => Err(self.error_at(
                ParseErrorKind::Unexpected,
                "expected an integer".to_owned(),
                r,
            )),
        }
    }

    fn float(&mut self) -> Result<f64> {
        match self.literal()? {
            (Lit::Int(t) | Lit::Float(t), r) => {
                parse_f64(&t).ok_or_else(|| self.bad_number(&t, "a float", r))
            }
            (Lit::Str, r) => Err(self.error_at(
                ParseErrorKind::Unexpected,
                "expected a number".to_owned(),
                r,
            )),
        }
    }

    fn float32(&mut self) -> Result<f32> {
        match self.literal()? {
            (Lit::Int(t) | Lit::Float(t), r) => {
                parse_f32(&t).ok_or_else(|| self.bad_number(&t, "a float", r))
            }
            (Lit::Str, r) => Err(self.error_at(
                ParseErrorKind::Unexpected,
                "expected a number".to_owned(),
                r,
            )),
        }
    }

    fn bad_number(&self, text: &str, ty: &str, r: Range<usize>) -> ParseError {
        self.error_at(
            ParseErrorKind::BadNumber,
            format!("`{text}` is not a valid {ty}"),
            r,
        )
    }

    fn enter(&mut self) -> Result<()> {
        if self.depth >= MAX_NESTING {
            return Err(self.error(
                ParseErrorKind::TooDeep,
                format!("graphs or types nested deeper than {MAX_NESTING} levels"),
            ));
        }
        self.depth += 1;
        Ok(())
    }

    // ---- model --------------------------------------------------------------------------

    fn model(&mut self) -> Result<ModelProto> {
        let mut m = ModelProto::default();
        if self.eat(b'<') {
            loop {
                let range = self.token();
                let key = self.ident("a header key")?;
                self.expect(b':', "`:`")?;
                match key.as_str() {
                    "ir_version" => m.ir_version = Some(self.int()?),
                    "opset_import" => m.opset_import = self.opsets()?,
                    "producer_name" => m.producer_name = Some(self.string_utf8()?),
                    "producer_version" => m.producer_version = Some(self.string_utf8()?),
                    "domain" => m.domain = Some(self.string_utf8()?),
                    "model_version" => m.model_version = Some(self.int()?),
                    "doc_string" => m.doc_string = Some(self.string_utf8()?),
                    "metadata_props" => m.metadata_props = self.props(b'[', b']')?,
                    _ => {
                        return Err(self.error_at(
                            ParseErrorKind::UnknownKeyword,
                            format!("unknown model header key `{key}`"),
                            range,
                        ));
                    }
                }
                if !self.eat(b',') {
                    break;
                }
            }
            self.expect(b'>', "`,` or `>`")?;
        }
        m.graph = Some(*self.graph()?);
        while !self.at_end() {
            m.functions.push(self.function()?);
        }
        Ok(m)
    }

    fn opsets(&mut self) -> Result<Vec<OperatorSetIdProto>> {
        let mut out = Vec::new();
        self.expect(b'[', "`[`")?;
        if self.eat(b']') {
            return Ok(out);
        }
        loop {
            let domain = self.string_utf8()?;
            self.expect(b':', "`:`")?;
            let version = self.int()?;
            out.push(OperatorSetIdProto {
                domain: Some(domain),
                version: Some(version),
            });
            if !self.eat(b',') {
                break;
            }
        }
        self.expect(b']', "`,` or `]`")?;
        Ok(out)
    }

    fn props(&mut self, open: u8, close: u8) -> Result<Vec<StringStringEntryProto>> {
        let mut out = Vec::new();
        self.expect(open, "`[`")?;
        if self.eat(close) {
            return Ok(out);
        }
        loop {
            let key = self.string_utf8()?;
            self.expect(b':', "`:`")?;
            let value = self.string_utf8()?;
            out.push(StringStringEntryProto {
                key: Some(key),
                value: Some(value),
            });
            if !self.eat(b',') {
                break;
            }
        }
        self.expect(close, "`,` or `]`")?;
        Ok(out)
    }

    fn function(&mut self) -> Result<FunctionProto> {
        let mut f = FunctionProto::default();
        if self.eat(b'<') {
            loop {
                let range = self.token();
                let key = self.ident("a function header key")?;
                self.expect(b':', "`:`")?;
                match key.as_str() {
                    "domain" => f.domain = Some(self.string_utf8()?),
                    "overload" => f.overload = Some(self.string_utf8()?),
                    "opset_import" => f.opset_import = self.opsets()?,
                    "doc_string" => f.doc_string = Some(self.string_utf8()?),
                    _ => {
                        return Err(self.error_at(
                            ParseErrorKind::UnknownKeyword,
                            format!("unknown function header key `{key}`"),
                            range,
                        ));
                    }
                }
                if !self.eat(b',') {
                    break;
                }
            }
            self.expect(b'>', "`,` or `>`")?;
        }
        f.name = Some(self.qid("a function name")?);
        if self.eat(b'<') && !self.eat(b'>') {
            loop {
                let name = self.qid("an attribute name")?;
                if matches!(self.peek(), Some(b':' | b'=')) {
                    f.attribute_proto.push(self.attribute_named(name)?);
                } else {
                    f.attribute.push(name);
                }
                if !self.eat(b',') {
                    break;
                }
            }
            self.expect(b'>', "`,` or `>`")?;
        }
        f.input = self.function_params(&mut f.value_info)?;
        self.arrow()?;
        f.output = self.function_params(&mut f.value_info)?;
        if self.eat(b'<') && !self.eat(b'>') {
            loop {
                f.value_info.push(self.value_info()?);
                if !self.eat(b',') {
                    break;
                }
            }
            self.expect(b'>', "`,` or `>`")?;
        }
        f.node = self.nodes()?;
        Ok(f)
    }

    fn function_params(&mut self, vis: &mut Vec<ValueInfoProto>) -> Result<Vec<String>> {
        let mut names = Vec::new();
        self.expect(b'(', "`(`")?;
        if self.eat(b')') {
            return Ok(names);
        }
        loop {
            if self.next_is_type() {
                let vi = self.value_info()?;
                names.push(vi.name().to_owned());
                vis.push(vi);
            } else {
                names.push(self.qid("a name")?);
            }
            if !self.eat(b',') {
                break;
            }
        }
        self.expect(b')', "`,` or `)`")?;
        Ok(names)
    }

    fn arrow(&mut self) -> Result<()> {
        self.expect(b'=', "`=>`")?;
        self.expect(b'>', "`=>`")
    }

    // ---- graphs and nodes ---------------------------------------------------------------

    fn graph(&mut self) -> Result<Box<GraphProto>> {
        self.enter()?;
        let g = self.graph_inner();
        self.depth -= 1;
        g
    }

    /// Boxed, to keep the frames on the path of graph nesting small.
    fn graph_inner(&mut self) -> Result<Box<GraphProto>> {
        let mut g = Box::new(GraphProto {
            name: Some(self.qid("a graph name")?),
            ..GraphProto::default()
        });
        self.expect(b'(', "`(`")?;
        if !self.eat(b')') {
            loop {
                let vi = self.value_info()?;
                if self.eat(b'=') {
                    let t = self.tensor_data(vi.r#type.as_ref(), vi.name())?;
                    g.initializer.push(t);
                }
                g.input.push(vi);
                if !self.eat(b',') {
                    break;
                }
            }
            self.expect(b')', "`,` or `)`")?;
        }
        self.arrow()?;
        self.expect(b'(', "`(`")?;
        if !self.eat(b')') {
            loop {
                g.output.push(self.value_info()?);
                if !self.eat(b',') {
                    break;
                }
            }
            self.expect(b')', "`,` or `)`")?;
        }
        if self.eat(b'<') && !self.eat(b'>') {
            loop {
                self.graph_entry(&mut g)?;
                if !self.eat(b',') {
                    break;
                }
            }
            self.expect(b'>', "`,` or `>`")?;
        }
        g.node = self.nodes()?;
        Ok(g)
    }

    /// One entry of a graph's `<...>` list: an initializer, a sparse initializer or a value
    /// info.
    fn graph_entry(&mut self, g: &mut GraphProto) -> Result<()> {
        if self.peek_ident() == Some("sparse") {
            let save = self.pos;
            self.ident_opt();
            if matches!(self.peek(), Some(b'"')) || self.peek_ident().is_some() {
                let name = self.qid("a name")?;
                self.expect(b'=', "`=`")?;
                let mut s = self.sparse()?;
                if let Some(v) = s.values.as_mut() {
                    v.name = Some(name);
                }
                g.sparse_initializer.push(s);
                return Ok(());
            }
            self.pos = save;
        }
        let vi = self.value_info()?;
        if self.eat(b'=') {
            let t = self.tensor_data(vi.r#type.as_ref(), vi.name())?;
            g.initializer.push(t);
        } else {
            g.value_info.push(vi);
        }
        Ok(())
    }

    fn nodes(&mut self) -> Result<Vec<NodeProto>> {
        let mut out = Vec::new();
        self.expect(b'{', "`{`")?;
        while !self.eat(b'}') {
            if self.at_end() {
                return Err(self.unexpected("a node or `}`"));
            }
            out.push(*self.node()?);
        }
        Ok(out)
    }

    fn node(&mut self) -> Result<Box<NodeProto>> {
        let mut n = Box::<NodeProto>::default();
        if self.eat(b'[') && !self.eat(b']') {
            let name = self.qid("a node name")?;
            n.name = Some(name);
            self.expect(b']', "`]`")?;
        }
        if self.peek() != Some(b'=') {
            n.output = self.names(b'=')?;
        }
        self.expect(b'=', "`=`")?;
        let mut parts = vec![self.qid("an operator")?];
        while self.eat(b'.') {
            parts.push(self.qid("an operator")?);
        }
        let op = parts.pop().unwrap_or_default();
        let domain = parts.join(".");
        n.op_type = Some(op);
        if !domain.is_empty() {
            n.domain = Some(domain);
        }
        if self.eat(b':') {
            n.overload = Some(self.qid("an overload name")?);
        }
        if self.peek() == Some(b'<') {
            n.attribute = self.attributes()?;
        }
        self.expect(b'(', "`(` or `<`")?;
        if !self.eat(b')') {
            n.input = self.names(b')')?;
            self.expect(b')', "`,` or `)`")?;
        }
        if n.attribute.is_empty() && self.peek() == Some(b'<') {
            n.attribute = self.attributes()?;
        }
        Ok(n)
    }

    /// A comma-separated list of names where a name may be left out (`Op(, x)`), ending
    /// before `close`.
    fn names(&mut self, close: u8) -> Result<Vec<String>> {
        let mut out = Vec::new();
        loop {
            match self.peek() {
                Some(b',') => out.push(String::new()),
                Some(c) if c == close => {
                    // `Op(x,)`: a trailing comma adds nothing.
                    break;
                }
                _ => out.push(self.qid("a name")?),
            }
            if !self.eat(b',') {
                break;
            }
        }
        Ok(out)
    }

    fn value_info(&mut self) -> Result<ValueInfoProto> {
        let mut vi = ValueInfoProto::default();
        if self.next_is_type() {
            vi.r#type = Some(self.type_proto()?);
        }
        vi.name = Some(self.qid("a value name")?);
        Ok(vi)
    }

    fn next_is_type(&mut self) -> bool {
        self.peek_ident().is_some_and(|id| {
            tensor::elem_code(id).is_some()
                || matches!(id, "seq" | "map" | "optional" | "sparse_tensor" | "opaque")
        })
    }

    // ---- types --------------------------------------------------------------------------

    fn type_proto(&mut self) -> Result<TypeProto> {
        self.enter()?;
        let t = self.type_inner();
        self.depth -= 1;
        t
    }

    fn type_inner(&mut self) -> Result<TypeProto> {
        let range = self.token();
        let id = self.ident("a type")?;
        let value = if let Some(code) = tensor::elem_code(&id) {
            type_proto::Value::TensorType(type_proto::Tensor {
                elem_type: elem(code),
                shape: self.shape()?,
            })
        } else {
            match id.as_str() {
                "seq" => {
                    let e = self.inner_type()?;
                    type_proto::Value::SequenceType(Box::new(type_proto::Sequence {
                        elem_type: e.map(Box::new),
                    }))
                }
                "optional" => {
                    let e = self.inner_type()?;
                    type_proto::Value::OptionalType(Box::new(type_proto::Optional {
                        elem_type: e.map(Box::new),
                    }))
                }
                "map" => {
                    self.expect(b'(', "`(`")?;
                    let key = self.elem_name()?;
                    self.expect(b',', "`,`")?;
                    let value = if self.peek() == Some(b')') {
                        None
                    } else {
                        Some(Box::new(self.type_proto()?))
                    };
                    self.expect(b')', "`)`")?;
                    type_proto::Value::MapType(Box::new(type_proto::Map {
                        key_type: elem(key),
                        value_type: value,
                    }))
                }
                "sparse_tensor" => {
                    self.expect(b'(', "`(`")?;
                    let code = self.elem_name()?;
                    let shape = self.shape()?;
                    self.expect(b')', "`)`")?;
                    type_proto::Value::SparseTensorType(type_proto::SparseTensor {
                        elem_type: elem(code),
                        shape,
                    })
                }
                "opaque" => self.opaque()?,
                _ => {
                    return Err(self.error_at(
                        ParseErrorKind::UnknownType,
                        format!("unknown type `{id}`"),
                        range,
                    ));
                }
            }
        };
        Ok(TypeProto {
            denotation: None,
            value: Some(value),
        })
    }

    fn inner_type(&mut self) -> Result<Option<TypeProto>> {
        self.expect(b'(', "`(`")?;
        let t = if self.peek() == Some(b')') {
            None
        } else {
            Some(self.type_proto()?)
        };
        self.expect(b')', "`)`")?;
        Ok(t)
    }

    fn opaque(&mut self) -> Result<type_proto::Value> {
        self.expect(b'(', "`(`")?;
        let mut o = type_proto::Opaque::default();
        if !self.eat(b')') {
            let first = self.dotted()?;
            if self.eat(b',') {
                o.domain = Some(first);
                o.name = Some(self.dotted()?);
            } else {
                o.name = Some(first);
            }
            self.expect(b')', "`)`")?;
        }
        Ok(type_proto::Value::OpaqueType(o))
    }

    fn dotted(&mut self) -> Result<String> {
        let mut s = self.qid("a name")?;
        while self.eat(b'.') {
            s.push('.');
            s.push_str(&self.qid("a name")?);
        }
        Ok(s)
    }

    fn elem_name(&mut self) -> Result<i32> {
        let range = self.token();
        let id = self.ident("an element type")?;
        tensor::elem_code(&id).ok_or_else(|| {
            self.error_at(
                ParseErrorKind::UnknownType,
                format!("unknown element type `{id}`"),
                range,
            )
        })
    }

    /// `[d, ...]` (known rank), `[]` (unknown rank) or nothing (a scalar).
    fn shape(&mut self) -> Result<Option<TensorShapeProto>> {
        if !self.eat(b'[') {
            return Ok(Some(TensorShapeProto::default()));
        }
        if self.eat(b']') {
            return Ok(None);
        }
        let mut shape = TensorShapeProto::default();
        loop {
            let value = if self.eat(b'?') {
                None
            } else if self.peek() == Some(b'"') {
                Some(dimension::Value::DimParam(self.string_utf8()?))
            } else if let Some(id) = self.ident_opt() {
                Some(dimension::Value::DimParam(id.to_owned()))
            } else {
                Some(dimension::Value::DimValue(self.int()?))
            };
            shape.dim.push(Dimension {
                denotation: None,
                value,
            });
            if !self.eat(b',') {
                break;
            }
        }
        self.expect(b']', "`,` or `]`")?;
        Ok(Some(shape))
    }

    // ---- tensors ------------------------------------------------------------------------

    /// A tensor value in an attribute: `type [name] [=] data`.
    fn tensor_value(&mut self) -> Result<TensorProto> {
        let ty = self.type_proto()?;
        let name = if self.peek() == Some(b'"') || self.peek_ident().is_some() {
            self.qid("a tensor name")?
        } else {
            String::new()
        };
        self.eat(b'=');
        self.tensor_data(Some(&ty), &name)
    }

    /// The data of a tensor whose type and name are known: `{values}`, `[external data]`,
    /// `...` (values left out) or nothing.
    fn tensor_data(&mut self, ty: Option<&TypeProto>, name: &str) -> Result<TensorProto> {
        let range = self.token();
        let Some(TypeProto {
            value: Some(type_proto::Value::TensorType(tt)),
            ..
        }) = ty
        else {
            return Err(self.error_at(
                ParseErrorKind::BadTensor,
                "a tensor needs a tensor type".to_owned(),
                range,
            ));
        };
        let Some(shape) = &tt.shape else {
            return Err(self.error_at(
                ParseErrorKind::BadTensor,
                "a tensor needs a shape (`[]` is an unknown rank)".to_owned(),
                range,
            ));
        };
        let mut t = TensorProto {
            data_type: Some(tt.elem_type()),
            ..TensorProto::default()
        };
        if !name.is_empty() {
            t.name = Some(name.to_owned());
        }
        for d in &shape.dim {
            match d.value {
                Some(dimension::Value::DimValue(v)) => t.dims.push(v),
                _ => {
                    return Err(self.error_at(
                        ParseErrorKind::BadTensor,
                        "a tensor's dimensions must be numbers".to_owned(),
                        range,
                    ));
                }
            }
        }
        if self.eat(b'{') {
            if !self.eat(b'}') {
                loop {
                    self.tensor_value_into(&mut t)?;
                    if !self.eat(b',') {
                        break;
                    }
                }
                self.expect(b'}', "`,` or `}`")?;
            }
        } else if self.peek() == Some(b'[') {
            t.data_location = Some(1);
            t.external_data = self.props(b'[', b']')?;
        } else if self.peek() == Some(b'.') {
            for _ in 0..3 {
                self.expect(b'.', "`...`")?;
            }
        }
        Ok(t)
    }

    fn tensor_value_into(&mut self, t: &mut TensorProto) -> Result<()> {
        let Some(store) = tensor::store(t.data_type()) else {
            return Err(self.error(
                ParseErrorKind::BadTensor,
                "values cannot be given for this element type".to_owned(),
            ));
        };
        match store {
            Store::Int32 { .. } => {
                let range = self.token();
                let v = self.int()?;
                let v = i32::try_from(v).map_err(|_| {
                    self.error_at(
                        ParseErrorKind::BadNumber,
                        format!("{v} does not fit the element type"),
                        range,
                    )
                })?;
                t.int32_data.push(v);
            }
            Store::Int64 => {
                let v = self.int()?;
                t.int64_data.push(v);
            }
            Store::Uint64 { .. } => match self.literal()? {
                (Lit::Int(s), r) => {
                    let v = s
                        .parse::<u64>()
                        .map_err(|_| self.bad_number(&s, "uint64", r))?;
                    t.uint64_data.push(v);
                }
                (_, r) => {
                    return Err(self.error_at(
                        ParseErrorKind::Unexpected,
                        "expected an unsigned integer".to_owned(),
                        r,
                    ));
                }
            },
            Store::Float => {
                let v = self.float32()?;
                t.float_data.push(v);
            }
            Store::Double => {
                let v = self.float()?;
                t.double_data.push(v);
            }
            Store::String => {
                let v = self.string()?;
                t.string_data.push(Bytes::from(v));
            }
        }
        Ok(())
    }

    /// `sparse(values, indices, [dims])`.
    fn sparse(&mut self) -> Result<SparseTensorProto> {
        let range = self.token();
        if self.ident_opt() != Some("sparse") {
            return Err(self.error_at(
                ParseErrorKind::Unexpected,
                "expected `sparse(...)`".to_owned(),
                range,
            ));
        }
        self.expect(b'(', "`(`")?;
        let values = self.tensor_value()?;
        self.expect(b',', "`,`")?;
        let indices = self.tensor_value()?;
        self.expect(b',', "`,`")?;
        self.expect(b'[', "`[`")?;
        let mut dims = Vec::new();
        if !self.eat(b']') {
            loop {
                dims.push(self.int()?);
                if !self.eat(b',') {
                    break;
                }
            }
            self.expect(b']', "`,` or `]`")?;
        }
        self.expect(b')', "`)`")?;
        Ok(SparseTensorProto {
            values: Some(values),
            indices: Some(indices),
            dims,
        })
    }

    // ---- attributes ---------------------------------------------------------------------

    fn attributes(&mut self) -> Result<Vec<AttributeProto>> {
        let mut out = Vec::new();
        self.expect(b'<', "`<`")?;
        loop {
            let name = self.qid("an attribute name")?;
            out.push(AttributeProto::default());
            if let Some(slot) = out.last_mut() {
                self.attribute_into(name, slot)?;
            }
            if !self.eat(b',') {
                break;
            }
        }
        self.expect(b'>', "`,` or `>`")?;
        Ok(out)
    }

    fn attribute_named(&mut self, name: String) -> Result<AttributeProto> {
        let mut a = AttributeProto::default();
        self.attribute_into(name, &mut a)?;
        Ok(a)
    }

    /// Parses an attribute into `a` in place: an `AttributeProto` is large, and this is on the
    /// path of graph nesting, where every moved copy costs stack.
    fn attribute_into(&mut self, name: String, a: &mut AttributeProto) -> Result<()> {
        a.name = Some(name);
        let mut declared = AttributeType::Undefined;
        if self.eat(b':') {
            let range = self.token();
            let ty = self.ident("an attribute type")?;
            declared = attr_type_of(&ty).ok_or_else(|| {
                self.error_at(
                    ParseErrorKind::UnknownType,
                    format!("unknown attribute type `{ty}`"),
                    range,
                )
            })?;
            a.r#type = Some(declared as i32);
        }
        self.expect(b'=', "`=`")?;
        if self.eat(b'@') {
            a.ref_attr_name = Some(self.qid("an attribute name")?);
            return Ok(());
        }
        if self.peek() != Some(b'[') {
            let range = self.token();
            let ty = self.single(a, declared)?;
            self.check_type(a, ty, declared, range)?;
            return Ok(());
        }
        let range = self.token();
        self.expect(b'[', "`[`")?;
        let item_expected = singular(declared);
        if self.eat(b']') {
            if declared == AttributeType::Undefined {
                return Err(self.error_at(
                    ParseErrorKind::BadAttribute,
                    "an empty list needs a type (`name: ints = []`)".to_owned(),
                    range,
                ));
            }
            if singular(declared) == declared {
                return Err(self.error_at(
                    ParseErrorKind::BadAttribute,
                    "a single-valued attribute cannot be a list".to_owned(),
                    range,
                ));
            }
            return Ok(());
        }
        let mut list_ty = AttributeType::Undefined;
        loop {
            let item_range = self.token();
            let mut item = Box::<AttributeProto>::default();
            let ty = self.single(&mut item, item_expected)?;
            let plural = plural(ty);
            if list_ty != AttributeType::Undefined && plural != list_ty {
                return Err(self.error_at(
                    ParseErrorKind::BadAttribute,
                    "list items of different types".to_owned(),
                    item_range,
                ));
            }
            list_ty = plural;
            match ty {
                AttributeType::Float => a.floats.push(item.f()),
                AttributeType::Int => a.ints.push(item.i()),
                AttributeType::String => a.strings.push(item.s.take().unwrap_or_default()),
                AttributeType::Tensor => a.tensors.extend(item.t.take().map(|t| *t)),
                AttributeType::Graph => a.graphs.extend(item.g.take().map(|g| *g)),
                AttributeType::SparseTensor => a
                    .sparse_tensors
                    .extend(item.sparse_tensor.take().map(|t| *t)),
                AttributeType::TypeProto => a.type_protos.extend(item.tp.take().map(|t| *t)),
                _ => {}
            }
            if !self.eat(b',') {
                break;
            }
        }
        self.expect(b']', "`,` or `]`")?;
        self.check_type(a, list_ty, declared, range)
    }

    fn check_type(
        &self,
        a: &mut AttributeProto,
        found: AttributeType,
        declared: AttributeType,
        range: Range<usize>,
    ) -> Result<()> {
        if declared != AttributeType::Undefined && declared != found {
            return Err(self.error_at(
                ParseErrorKind::BadAttribute,
                format!(
                    "the value is {}, but the attribute is declared {}",
                    super::printer::attr_type_name(found).unwrap_or("untyped"),
                    super::printer::attr_type_name(declared).unwrap_or("untyped"),
                ),
                range.start..self.pos.max(range.end),
            ));
        }
        a.r#type = Some(found as i32);
        Ok(())
    }

    /// One attribute value into `a`; returns its (singular) type.
    fn single(&mut self, a: &mut AttributeProto, expected: AttributeType) -> Result<AttributeType> {
        let ty = match expected {
            AttributeType::Graph => AttributeType::Graph,
            AttributeType::Tensor => AttributeType::Tensor,
            AttributeType::SparseTensor => AttributeType::SparseTensor,
            AttributeType::TypeProto => AttributeType::TypeProto,
            _ => self.guess_single(expected)?,
        };
        match ty {
            AttributeType::Graph => a.g = Some(self.graph()?),
            AttributeType::Tensor => a.t = Some(Box::new(self.tensor_value()?)),
            AttributeType::SparseTensor => a.sparse_tensor = Some(Box::new(self.sparse()?)),
            AttributeType::TypeProto => a.tp = Some(Box::new(self.type_proto()?)),
            AttributeType::String => a.s = Some(Bytes::from(self.string()?)),
            AttributeType::Int => a.i = Some(self.int()?),
            _ => a.f = Some(self.float32()?),
        }
        Ok(ty)
    }

    /// Which kind of single value comes next, without consuming it (a type followed by data
    /// is a tensor, a bare type a type proto).
    fn guess_single(&mut self, expected: AttributeType) -> Result<AttributeType> {
        let Some(c) = self.peek() else {
            return Err(self.unexpected("a value"));
        };
        if c == b'"' {
            return Ok(AttributeType::String);
        }
        if let Some(id) = self.peek_ident() {
            let lower = id.to_ascii_lowercase();
            if matches!(lower.as_str(), "nan" | "inf" | "infinity") {
                return Ok(AttributeType::Float);
            }
            if id == "sparse" {
                let save = self.pos;
                self.ident_opt();
                let call = self.peek() == Some(b'(');
                self.pos = save;
                if call {
                    return Ok(AttributeType::SparseTensor);
                }
            }
            if self.next_is_type() {
                let save = self.pos;
                let save_depth = self.depth;
                self.type_proto()?;
                let next = self.peek();
                let data = matches!(next, Some(b'{' | b'=' | b'"' | b'['))
                    || (next == Some(b'.') && self.peek_at(1) == Some(b'.'))
                    || self.peek_ident().is_some();
                self.pos = save;
                self.depth = save_depth;
                return Ok(if data {
                    AttributeType::Tensor
                } else {
                    AttributeType::TypeProto
                });
            }
            return Ok(AttributeType::Graph);
        }
        let save = self.pos;
        let (lit, _) = self.literal()?;
        self.pos = save;
        Ok(match lit {
            Lit::Int(_) if expected == AttributeType::Float => AttributeType::Float,
            Lit::Int(_) => AttributeType::Int,
            Lit::Float(_) => AttributeType::Float,
            Lit::Str => AttributeType::String,
        })
    }
}

/// `None` for `undefined` (element type 0), as an unset field.
fn elem(code: i32) -> Option<i32> {
    (code != 0).then_some(code)
}

fn attr_type_of(name: &str) -> Option<AttributeType> {
    Some(match name {
        "float" => AttributeType::Float,
        "int" => AttributeType::Int,
        "string" => AttributeType::String,
        "tensor" => AttributeType::Tensor,
        "graph" => AttributeType::Graph,
        "sparse_tensor" => AttributeType::SparseTensor,
        "type_proto" => AttributeType::TypeProto,
        "floats" => AttributeType::Floats,
        "ints" => AttributeType::Ints,
        "strings" => AttributeType::Strings,
        "tensors" => AttributeType::Tensors,
        "graphs" => AttributeType::Graphs,
        "sparse_tensors" => AttributeType::SparseTensors,
        "type_protos" => AttributeType::TypeProtos,
        _ => return None,
    })
}

fn singular(t: AttributeType) -> AttributeType {
    match t {
        AttributeType::Floats => AttributeType::Float,
        AttributeType::Ints => AttributeType::Int,
        AttributeType::Strings => AttributeType::String,
        AttributeType::Tensors => AttributeType::Tensor,
        AttributeType::Graphs => AttributeType::Graph,
        AttributeType::SparseTensors => AttributeType::SparseTensor,
        AttributeType::TypeProtos => AttributeType::TypeProto,
        other => other,
    }
}

fn plural(t: AttributeType) -> AttributeType {
    match t {
        AttributeType::Float => AttributeType::Floats,
        AttributeType::Int => AttributeType::Ints,
        AttributeType::String => AttributeType::Strings,
        AttributeType::Tensor => AttributeType::Tensors,
        AttributeType::Graph => AttributeType::Graphs,
        AttributeType::SparseTensor => AttributeType::SparseTensors,
        AttributeType::TypeProto => AttributeType::TypeProtos,
        other => other,
    }
}

fn parse_i64(t: &str) -> Option<i64> {
    t.parse().ok()
}

fn special(t: &str) -> Option<f64> {
    let (neg, bare) = match t.strip_prefix('-') {
        Some(b) => (true, b),
        None => (false, t),
    };
    let v = match bare.to_ascii_lowercase().as_str() {
        "nan" => f64::NAN,
        "inf" | "infinity" => f64::INFINITY,
        _ => return None,
    };
    Some(if neg { -v } else { v })
}

fn parse_f64(t: &str) -> Option<f64> {
    special(t).or_else(|| t.parse().ok())
}

fn parse_f32(t: &str) -> Option<f32> {
    match special(t) {
        Some(v) => Some(v as f32),
        None => t.parse().ok(),
    }
}
