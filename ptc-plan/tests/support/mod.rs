pub mod config_expect;
