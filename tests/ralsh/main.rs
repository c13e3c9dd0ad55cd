//! Integration tests: the built `ralsh` binary against fixture providers
//! (tests/fixtures) and the bundled ones, always on a temporary fake root.

mod account_aging;
#[path = "../common/account_cases.rs"]
mod account_cases;
mod account_files;
mod account_homes;
mod account_properties;
mod account_values;
mod answers;
mod attacks;
mod bundled;
mod cli;
mod closed_stdout;
mod completion;
mod concurrent_edits;
mod create_view;
mod destroy_guard;
mod discovery;
mod escapees;
mod example;
mod facts;
mod forgotten_items;
mod hostile_inputs;
mod html_report;
mod interpreters;
mod json_convention;
mod layers;
mod libral_cli;
mod libral_providers;
mod library_run;
mod manifest;
mod manuals;
mod metadata_cache;
mod metadata_schema;
mod misplaced_inputs;
mod mount_readers;
#[path = "../common/mutations.rs"]
mod mutations;
mod native_limits;
mod output_schema;
mod ownership;
#[path = "../common/pids.rs"]
mod pids;
mod plan_schema;
mod plan_view;
mod plans;
mod plans_bundled;
mod plugins;
mod process;
mod properties;
#[path = "../common/property.rs"]
mod property;
mod provider_accounts;
mod provider_cron;
mod provider_exec;
mod provider_failures;
mod provider_file;
mod provider_mount;
mod provider_service;
mod provider_ssh_key;
mod provider_user;
mod pty;
mod puppet_yaml;
mod quoting;
#[path = "../common/quoting_cases.rs"]
mod quoting_cases;
mod ral_check;
mod ral_check_findings;
mod ral_check_plugins;
mod ral_check_round_trip;
mod redaction;
mod refresh;
mod saved_plan_edges;
mod saved_plans;
mod sensitive_env;
mod simple_output;
mod state_store;
mod store_paths;
mod suggestions;
mod support;
mod templating;
mod terminal;
mod toolkit;
mod types;
mod update;
mod withheld_content;
