//! The submit language's tests, in one binary: HTCondor's own answers
//! (`oracle`) and submit descriptions as users write them.

mod oracle;
mod submit;
