//! HTCondor's ClassAd language: values, expressions, evaluation and matchmaking.

pub mod argenv;
pub mod ast;
pub mod budget;
pub mod builtins;
pub mod eval;
pub mod json;
pub mod lexer;
pub mod matching;
pub mod parser;
pub mod refs;
mod table;
mod text;
pub mod unparse;
pub mod value;

pub use ast::{AttrName, BinOp, ClassAd, Expr, NameRef, Names, UnOp};
pub use budget::Budget;
pub use eval::{EvalOptions, Evaluator};
pub use matching::{rank, symmetric_match};
pub use parser::{ParseError, parse_ad, parse_ads, parse_expr, parse_old_ad};
pub use table::{Interned, interned};
pub use value::Value;
