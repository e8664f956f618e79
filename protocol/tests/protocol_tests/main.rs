//! The protocol's tests, in one binary: signed requests over real HTTP,
//! streamed files, and the wire's types.

mod http;
mod stream;
mod wire;
