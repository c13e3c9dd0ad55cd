//! Remote targets: where running providers on other machines over OpenSSH
//! will live. The host logic stays on the controller; a target needs only
//! `sh` and what its providers need. So far this holds the reader of the
//! Ansible YAML inventories that name those targets.

pub mod inventory;
