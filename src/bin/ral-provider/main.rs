//! `ral-provider NAME ARGS...`: serves one of ral's native providers as a
//! program, for where ralsh does not run it in its own process — on a
//! remote target, where it travels with the providers' scripts, or started
//! by hand. Each bundled native provider's `NAME.prov` runs this program
//! with its name; the rest is the provider's calling convention.
//!
//! It uses the SDK's crate alone (`ral_sdk`), not the host's library.

use std::process::ExitCode;

fn main() -> ExitCode {
    let mut args = std::env::args_os().skip(1);
    let name = args.next().map(|name| name.to_string_lossy().into_owned());
    let Some(native) = name.as_deref().and_then(ral_sdk::native::find) else {
        let known: Vec<&str> = ral_sdk::native::names().collect();
        let problem = match name.as_deref() {
            None => "no provider named".to_owned(),
            Some(name) => format!(
                "'{}' is not one of ral's native providers",
                ral_sdk::text::escape(name)
            ),
        };
        eprintln!(
            "ral-provider: {problem}\n\
             usage: ral-provider NAME ral_action=ACTION [KEY=VALUE...]\n\
             Serves one of ral's native providers ({}) as a program, in the\n\
             calling convention its metadata declares (ral_action=describe prints it);\n\
             ralsh and ral run them in their own process and need this program only\n\
             on remote targets and for a provider run by hand.",
            known.join(", ")
        );
        return ExitCode::from(2);
    };
    let args: Vec<String> = args.map(|arg| arg.to_string_lossy().into_owned()).collect();
    ExitCode::from(ral_sdk::serve::main(native.0, &args) as u8)
}
