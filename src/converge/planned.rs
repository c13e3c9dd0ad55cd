//! What a saved plan's task was planned from: the state its read gave,
//! its sensitive values only as digests keyed with the store's key (so a
//! plan file never holds one), and the check that the state read just
//! before the task runs is still that one.

use serde_json::Value as Json;

use crate::resource::Resource;
use crate::store::StoreKey;
use crate::types::Value;

/// The keyed digest of a sensitive value, bound to its provider, resource
/// and attribute.
pub(super) fn secret_digest(
    key: &StoreKey,
    provider: &str,
    name: &str,
    attr: &str,
    value: &Value,
) -> String {
    let value = Json::from(value).to_string();
    key.digest(&secret_parts(provider, name, attr, &value))
}

/// Whether `hmac` is [`secret_digest`]'s for these.
pub(super) fn secret_matches(
    key: &StoreKey,
    provider: &str,
    name: &str,
    attr: &str,
    value: &Value,
    hmac: &str,
) -> bool {
    let value = Json::from(value).to_string();
    key.verify(&secret_parts(provider, name, attr, &value), hmac)
}

fn secret_parts<'a>(
    provider: &'a str,
    name: &'a str,
    attr: &'a str,
    value: &'a str,
) -> [&'a [u8]; 5] {
    [
        b"ral saved plan: sensitive value",
        provider.as_bytes(),
        name.as_bytes(),
        attr.as_bytes(),
        value.as_bytes(),
    ]
}

/// The state a saved plan's task was planned from, which the state read
/// just before it runs must still match.
#[derive(Debug, Clone)]
pub struct Planned {
    /// `None` when the provider did not know the resource; without its
    /// sensitive attributes.
    pub state: Option<Resource>,
    /// The keyed digests of the sensitive values it had.
    secrets: Vec<(String, String)>,
    key: StoreKey,
    provider: String,
}

impl Planned {
    /// `state` (`None`: not found), and `secrets` as (attribute, keyed
    /// digest) pairs made with `key` for `provider`.
    pub(super) fn new(
        state: Option<Resource>,
        secrets: Vec<(String, String)>,
        key: StoreKey,
        provider: String,
    ) -> Planned {
        Planned {
            state,
            secrets,
            key,
            provider,
        }
    }

    /// Whether the sensitive attribute `attr` of `name` had `value` (or no
    /// value) when the plan was made.
    pub fn secret_unchanged(&self, name: &str, attr: &str, value: Option<&Value>) -> bool {
        let then = self.secrets.iter().find(|(a, _)| a == attr);
        match (then, value) {
            (None, None) => true,
            (Some((_, hmac)), Some(value)) => {
                secret_matches(&self.key, &self.provider, name, attr, value, hmac)
            }
            _ => false,
        }
    }
}
