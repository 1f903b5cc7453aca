//! AWS's shared files, read as its own tools read them (the `object_store` crate reads only the
//! environment): the credentials file (`AWS_SHARED_CREDENTIALS_FILE`, else
//! `~/.aws/credentials`) and the config file (`AWS_CONFIG_FILE`, else `~/.aws/config`), in the
//! profile `AWS_PROFILE` names (else `default`). The environment's variables and the storage
//! options come after them, and win.

use std::path::PathBuf;

/// The settings of the S3 store the shared files give, as `object_store` names them
/// (`access_key_id`, `secret_access_key`, `token`, `region`, `endpoint`).
pub fn s3_settings() -> Vec<(&'static str, String)> {
    let home = std::env::var_os("HOME").map(PathBuf::from).unwrap_or_default();
    let file = |variable: &str, name: &str| {
        std::env::var_os(variable)
            .map(PathBuf::from)
            .unwrap_or_else(|| home.join(".aws").join(name))
    };
    let profile = std::env::var("AWS_PROFILE").unwrap_or_else(|_| "default".into());
    let read = |path: PathBuf| std::fs::read_to_string(path).unwrap_or_default();
    let credentials = read(file("AWS_SHARED_CREDENTIALS_FILE", "credentials"));
    let config = read(file("AWS_CONFIG_FILE", "config"));
    settings(&credentials, &config, &profile)
}

/// The settings of `profile` in the credentials file's text and the config file's (where a
/// profile's section is `[profile NAME]`, but `[default]`).
fn settings(credentials: &str, config: &str, profile: &str) -> Vec<(&'static str, String)> {
    let mut found = Vec::new();
    let named = [
        ("aws_access_key_id", "access_key_id"),
        ("aws_secret_access_key", "secret_access_key"),
        ("aws_session_token", "token"),
    ];
    let in_credentials = section(credentials, profile);
    for (file_key, key) in named {
        if let Some(value) = in_credentials.iter().find(|(k, _)| k == file_key) {
            found.push((key, value.1.clone()));
        }
    }
    let header =
        if profile == "default" { "default".to_string() } else { format!("profile {profile}") };
    let in_config = section(config, &header);
    for (file_key, key) in [("region", "region"), ("endpoint_url", "endpoint")] {
        if let Some(value) = in_config.iter().find(|(k, _)| k == file_key) {
            found.push((key, value.1.clone()));
        }
    }
    found
}

/// The `key = value` lines of the section `[name]` of an INI text.
fn section(text: &str, name: &str) -> Vec<(String, String)> {
    let mut inside = false;
    let mut lines = Vec::new();
    for line in text.lines().map(str::trim) {
        if let Some(header) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            inside = header.trim() == name;
        } else if inside && !line.starts_with(['#', ';']) {
            if let Some((key, value)) = line.split_once('=') {
                lines.push((key.trim().to_ascii_lowercase(), value.trim().to_string()));
            }
        }
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_profile_s_keys_and_region_are_read_from_the_two_files() {
        let credentials = "[default]\naws_access_key_id = A\naws_secret_access_key=B\n\n\
                           [work]\naws_access_key_id = W\naws_secret_access_key = X\n\
                           aws_session_token = T\n";
        let config = "[default]\nregion = eu-west-1\n[profile work]\n# a comment\n\
                      region = us-west-2\nendpoint_url = http://minio:9000\n";
        let default = settings(credentials, config, "default");
        assert_eq!(
            default,
            [
                ("access_key_id", "A".into()),
                ("secret_access_key", "B".into()),
                ("region", "eu-west-1".into())
            ]
        );
        let work = settings(credentials, config, "work");
        assert_eq!(work.len(), 5, "{work:?}");
        assert!(work.contains(&("token", "T".into())));
        assert!(work.contains(&("endpoint", "http://minio:9000".into())));
        assert!(settings("", "", "work").is_empty());
        for (key, _) in work {
            let parsed: Result<object_store::aws::AmazonS3ConfigKey, _> = key.parse();
            assert!(parsed.is_ok(), "{key} is a setting object_store names");
        }
    }
}
