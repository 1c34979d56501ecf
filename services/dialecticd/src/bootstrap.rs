//! `dialecticd bootstrap --file FILE`: what a new installation needs before
//! anyone can call it, declared in a file (the chart renders it from its
//! `bootstrap:` values and runs this in a post-install and post-upgrade Job):
//! an administrator's API key, starting credits and pipeline files. Models are
//! declared in the models file the migrate Job syncs. Every step is
//! idempotent: a second run with the same file changes nothing and says so.

use anyhow::{Context, anyhow, bail};
use dialectic_config::Settings;
use dialectic_core::ids::UserId;
use dialectic_core::pipeline::PipelineFile;
use dialectic_store::Store;
use serde::Deserialize;
use std::path::{Path, PathBuf};

/// Keys are at least this long (the prefix and 32 more characters): a
/// declared key guards an administrator.
const MIN_KEY_CHARS: usize = dialectic_core::apikey::KEY_PREFIX.len() + 32;

/// The file as written: TOML, or JSON as the chart renders it with toJson.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct BootstrapFile {
    admin_key: Option<DeclaredKey>,
    #[serde(default)]
    credits: Vec<DeclaredCredit>,
    /// Pipeline files, relative to the bootstrap file; a directory stands
    /// for every `*.toml` in it (a mounted ConfigMap).
    #[serde(default)]
    pipelines: Vec<PathBuf>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct DeclaredKey {
    /// The NAME of the environment variable holding the key, never the key.
    key_env: String,
    /// The key's label (`admin create-key --name`).
    #[serde(default = "default_key_name")]
    name: String,
    /// An administrator's id; default gateway.default_user_id.
    user: Option<String>,
}

fn default_key_name() -> String {
    "bootstrap".to_string()
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct DeclaredCredit {
    /// Default gateway.default_user_id.
    user: Option<String>,
    amount: i64,
    #[serde(default = "default_reason")]
    reason: String,
}

fn default_reason() -> String {
    "starting credits".to_string()
}

/// Everything read and checked before the database is touched.
#[derive(Debug)]
struct Plan {
    key: Option<PlannedKey>,
    credits: Vec<PlannedCredit>,
    pipelines: Vec<(PathBuf, PipelineFile)>,
}

#[derive(Debug)]
struct PlannedKey {
    key: String,
    name: String,
    user: UserId,
}

#[derive(Debug, PartialEq, Eq)]
struct PlannedCredit {
    user: UserId,
    amount: i64,
    reason: String,
    /// From the entry's user and amount: the same entry credits once, however
    /// often the file is applied.
    idempotency_key: String,
}

/// `dialecticd bootstrap --file FILE`.
pub async fn run(settings: &Settings, file: &Path) -> anyhow::Result<()> {
    let plan = read_plan(settings, file, |var| std::env::var(var).ok())
        .with_context(|| format!("{}", file.display()))?;
    let store = dialectic_runtime::store(settings)?;
    // Each step's line as it is done: a failed step leaves the earlier ones said.
    let mut changed = 0;
    let mut report = |done: bool, line: String| {
        changed += usize::from(done);
        println!("{line}");
    };
    if let Some(key) = &plan.key {
        let (done, line) = apply_key(&store, key).await?;
        report(done, line);
    }
    for credit in &plan.credits {
        let (done, line) = apply_credit(&store, credit).await?;
        report(done, line);
    }
    for (path, pipeline) in &plan.pipelines {
        let installed = dialectic_store::pipelines::install(store.pool(), pipeline)
            .await
            .with_context(|| format!("installing {}", path.display()))?;
        report(installed.created, crate::installed_line(&installed));
    }
    if changed == 0 {
        println!("bootstrap: everything declared is in place; nothing changed");
    } else {
        println!("bootstrap: {changed} change(s) applied");
    }
    Ok(())
}

fn read_plan(
    settings: &Settings,
    file: &Path,
    env: impl Fn(&str) -> Option<String>,
) -> anyhow::Result<Plan> {
    let text = std::fs::read_to_string(file).map_err(|e| anyhow!("reading: {e}"))?;
    let json = file.extension().is_some_and(|e| e == "json");
    let declared = parse(&text, json)?;
    let default_user = || {
        UserId::parse(settings.gateway.default_user_id.trim())
            .context("gateway.default_user_id is not a UUID")
    };
    let user = |given: &Option<String>, field: &str| match given {
        Some(text) => {
            UserId::parse(text.trim()).with_context(|| format!("{field}: {text:?} is not a UUID"))
        }
        None => default_user(),
    };
    let key = declared
        .admin_key
        .map(|k| {
            Ok::<_, anyhow::Error>(PlannedKey {
                key: declared_key(&k.key_env, &env)?,
                user: user(&k.user, "admin_key.user")?,
                name: k.name,
            })
        })
        .transpose()?;
    let mut credits = Vec::new();
    for (i, c) in declared.credits.into_iter().enumerate() {
        credits.push(planned_credit(
            user(&c.user, &format!("credits[{i}].user"))?,
            c,
            i,
        )?);
    }
    refuse_repeated_credits(&credits)?;
    let base = file.parent().unwrap_or(Path::new("."));
    let mut pipelines = Vec::new();
    for path in pipeline_files(base, &declared.pipelines)? {
        let pipeline = crate::read_pipeline(&path)?;
        pipelines.push((path, pipeline));
    }
    Ok(Plan {
        key,
        credits,
        pipelines,
    })
}

fn parse(text: &str, json: bool) -> anyhow::Result<BootstrapFile> {
    if json || text.trim_start().starts_with('{') {
        Ok(serde_json::from_str(text)?)
    } else {
        Ok(toml::from_str(text)?)
    }
}

/// The key from the variable the file names; the file itself never holds it.
fn declared_key(var: &str, env: impl Fn(&str) -> Option<String>) -> anyhow::Result<String> {
    // The configuration reads DIALECTIC_* variables as settings.
    if var.starts_with("DIALECTIC_") {
        bail!("admin_key.key_env: {var} is read as a setting; name another variable");
    }
    let key = env(var)
        .map(|k| k.trim().to_string())
        .filter(|k| !k.is_empty())
        .ok_or_else(|| anyhow!("admin_key.key_env: the variable {var} is not set or empty"))?;
    if !key.starts_with(dialectic_core::apikey::KEY_PREFIX) || key.chars().count() < MIN_KEY_CHARS {
        bail!(
            "admin_key.key_env: the key in {var} must start with {} and be at least {MIN_KEY_CHARS} \
             characters (e.g. `echo {}$(openssl rand -hex 32)`)",
            dialectic_core::apikey::KEY_PREFIX,
            dialectic_core::apikey::KEY_PREFIX
        );
    }
    Ok(key)
}

fn planned_credit(user: UserId, c: DeclaredCredit, i: usize) -> anyhow::Result<PlannedCredit> {
    if c.amount <= 0 {
        bail!(
            "credits[{i}].amount: {} is not a positive number of tokens",
            c.amount
        );
    }
    let digest = dialectic_core::digest::sha256_hex(format!("{user}\n{}", c.amount).as_bytes());
    Ok(PlannedCredit {
        user,
        amount: c.amount,
        reason: c.reason,
        idempotency_key: format!("bootstrap-{}", &digest[..32]),
    })
}

/// Two equal entries would share a key and credit once; say so instead.
fn refuse_repeated_credits(credits: &[PlannedCredit]) -> anyhow::Result<()> {
    for (i, c) in credits.iter().enumerate() {
        if let Some(j) = credits[..i]
            .iter()
            .position(|o| o.idempotency_key == c.idempotency_key)
        {
            bail!(
                "credits[{i}] repeats credits[{j}] (user {}, amount {}): each entry credits once; \
                 write the sum in one entry",
                c.user,
                c.amount
            );
        }
    }
    Ok(())
}

/// The declared paths, a directory expanded to its `*.toml` files in name order.
fn pipeline_files(base: &Path, declared: &[PathBuf]) -> anyhow::Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    for path in declared {
        let path = base.join(path);
        if !path.is_dir() {
            files.push(path);
            continue;
        }
        let mut found: Vec<PathBuf> = std::fs::read_dir(&path)
            .with_context(|| format!("reading {}", path.display()))?
            .filter_map(|entry| entry.ok().map(|e| e.path()))
            // A mounted ConfigMap's files are symlinks: is_file follows them.
            .filter(|p| p.extension().is_some_and(|e| e == "toml") && p.is_file())
            .collect();
        found.sort();
        files.extend(found);
    }
    Ok(files)
}

/// Stores the key's hash for its user once; a second run finds it.
async fn apply_key(store: &Store, key: &PlannedKey) -> anyhow::Result<(bool, String)> {
    let pool = store.pool();
    let hash = dialectic_core::apikey::hash(&key.key);
    let shown = dialectic_core::apikey::shown_part(&key.key);
    let present = format!("admin key {shown}… ({}) for user {}", key.name, key.user);
    if let Some(owner) = dialectic_store::auth::owner_of_key(pool, &hash).await? {
        return already_stored(owner, key, present);
    }
    if !dialectic_store::auth::is_admin(pool, key.user).await? {
        bail!(
            "admin_key.user: {} is not an administrator (or no such user)",
            key.user
        );
    }
    let inserted =
        dialectic_store::auth::insert_key(pool, key.user, &key.name, &hash, &shown).await;
    match inserted {
        Ok(_) => Ok((true, format!("{present}: stored"))),
        // key_hash is unique: a concurrent run stored it first, or the key
        // was revoked (which a declaration must not undo).
        Err(error) => match dialectic_store::auth::owner_of_key(pool, &hash).await? {
            Some(owner) => already_stored(owner, key, present),
            None => Err(anyhow!(error).context(
                "storing the declared key (a revoked key cannot be declared again: put a new \
                 key in its Secret)",
            )),
        },
    }
}

fn already_stored(
    owner: dialectic_store::auth::KeyOwner,
    key: &PlannedKey,
    present: String,
) -> anyhow::Result<(bool, String)> {
    if owner.user_id != key.user {
        bail!(
            "the declared admin key already belongs to user {}, not {}",
            owner.user_id,
            key.user
        );
    }
    Ok((false, format!("{present}: already stored; unchanged")))
}

/// Credits once under the entry's key; a second run finds the entry.
async fn apply_credit(store: &Store, credit: &PlannedCredit) -> anyhow::Result<(bool, String)> {
    let pool = store.pool();
    let wallet = dialectic_store::wallets::wallet_balance(pool, None, Some(credit.user))
        .await
        .with_context(|| format!("the wallet of user {}", credit.user))?;
    let present = format!("credit {} to user {}", credit.amount, credit.user);
    let key = &credit.idempotency_key;
    if dialectic_store::ledger::entry_with_key(pool, wallet.id, key)
        .await?
        .is_some()
    {
        return Ok((false, format!("{present}: already credited; unchanged")));
    }
    let entry =
        dialectic_store::ledger::credit(pool, wallet.id, credit.amount, key, &credit.reason)
            .await?;
    Ok((
        true,
        format!("{present}: credited, balance {}", entry.balance_after),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &str = "dlk_0123456789abcdef0123456789abcdef";

    fn plan(text: &str) -> anyhow::Result<Plan> {
        let dir = std::env::temp_dir().join(format!("bootstrap-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir)?;
        let file = dir.join("bootstrap.toml");
        std::fs::write(&file, text)?;
        let read = read_plan(&Settings::default(), &file, |var| {
            (var == "BOOTSTRAP_ADMIN_KEY").then(|| KEY.to_string())
        });
        let _ = std::fs::remove_dir_all(&dir);
        read
    }

    #[test]
    fn toml_and_the_charts_json_read_alike() {
        let toml =
            plan("[admin_key]\nkey_env = \"BOOTSTRAP_ADMIN_KEY\"\n[[credits]]\namount = 5000\n")
                .expect("toml");
        let json = plan(
            r#"{"admin_key":{"key_env":"BOOTSTRAP_ADMIN_KEY"},"credits":[{"amount":5000}],"pipelines":[]}"#,
        )
        .expect("json");
        assert_eq!(toml.credits, json.credits);
        let key = toml.key.expect("key");
        assert_eq!((key.key.as_str(), key.name.as_str()), (KEY, "bootstrap"));
        assert_eq!(
            key.user.to_string(),
            Settings::default().gateway.default_user_id
        );
    }

    #[test]
    fn a_credits_key_follows_its_entry_not_its_place() {
        let one = plan("[[credits]]\namount = 5000\n").expect("one");
        let moved = plan(
            "[[credits]]\namount = 7\nuser = \"00000000-0000-0000-0000-000000000002\"\n\
             [[credits]]\namount = 5000\nreason = \"other words\"\n",
        )
        .expect("two");
        assert_eq!(
            one.credits[0].idempotency_key,
            moved.credits[1].idempotency_key
        );
        assert_ne!(
            moved.credits[0].idempotency_key,
            moved.credits[1].idempotency_key
        );
    }

    #[test]
    fn bad_declarations_are_refused_before_the_database() {
        for (text, says) in [
            (
                "[admin_key]\nkey_env = \"UNSET_VAR\"\n",
                "UNSET_VAR is not set",
            ),
            (
                "[admin_key]\nkey_env = \"DIALECTIC_KEY\"\n",
                "read as a setting",
            ),
            (
                "[admin_key]\nkey = \"dlk_x\"\nkey_env = \"X\"\n",
                "unknown field `key`",
            ),
            ("[[credits]]\namount = 0\n", "credits[0].amount"),
            (
                "[[credits]]\namount = 5\n[[credits]]\namount = 5\n",
                "credits[1] repeats credits[0]",
            ),
            (
                "[[credits]]\namount = 5\nuser = \"me\"\n",
                "credits[0].user",
            ),
        ] {
            let error = format!("{:#}", plan(text).expect_err(text));
            assert!(error.contains(says), "{text}: {error}");
        }
    }
}
