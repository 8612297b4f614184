//! Scenario synthesis and the behavioral-gradient validator (DESIGN §2): a scenario is
//! admitted only if really running its three scripted plays through the audit stack and the
//! judge shows that it separates cautious from overeager play.

pub mod validate;
