//! ptc-plan
