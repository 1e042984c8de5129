//! ORT's `QDQSelectorActionTransformer` (`qdq_transformer/selectors_actions/`): one file per
//! ORT source, the driver in `qdq_selector_action_transformer.rs`.

pub mod qdq_actions;
pub mod qdq_selector_action_transformer;
pub mod qdq_selectors;
