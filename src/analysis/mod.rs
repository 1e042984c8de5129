//! Analyses of the model as written that rules and the fixer share (placement-independent).

pub mod opset_lowering;
