//! The two text formats of `GET /metrics`, chosen by `Accept` as
//! Prometheus's client libraries do: OpenMetrics 1.0 when asked for, else
//! the Prometheus text format 0.0.4 (`promtool`, `curl`). The counters are
//! written once as OpenMetrics; [`to_prometheus_text`] rewrites the lines
//! where the two differ.

/// A text format of `/metrics`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exposition {
    /// OpenMetrics 1.0 (`application/openmetrics-text; version=1.0.0`).
    OpenMetrics,
    /// The Prometheus text format 0.0.4 (`text/plain; version=0.0.4`).
    Prometheus,
}

impl Exposition {
    /// The `Content-Type` of a response in this format.
    pub fn content_type(self) -> &'static str {
        match self {
            Exposition::OpenMetrics => "application/openmetrics-text; version=1.0.0; charset=utf-8",
            Exposition::Prometheus => "text/plain; version=0.0.4; charset=utf-8",
        }
    }

    /// The format an `Accept` field value asks for: OpenMetrics when it
    /// names `application/openmetrics-text` with a weight at least that of
    /// `text/plain` (and above 0); the Prometheus text format otherwise,
    /// or without the field.
    pub fn from_accept(accept: Option<&[u8]>) -> Exposition {
        let Some(accept) = accept.and_then(|a| std::str::from_utf8(a).ok()) else {
            return Exposition::Prometheus;
        };
        let (mut openmetrics, mut text) = (0.0f32, 0.0f32);
        for range in accept.split(',') {
            let mut parts = range.split(';');
            let media = parts.next().unwrap_or_default().trim();
            let q = parts
                .filter_map(|p| p.trim().strip_prefix("q="))
                .find_map(|q| q.trim().parse::<f32>().ok())
                .unwrap_or(1.0);
            if media.eq_ignore_ascii_case("application/openmetrics-text") {
                openmetrics = openmetrics.max(q);
            } else if media.eq_ignore_ascii_case("text/plain") {
                text = text.max(q);
            }
        }
        if openmetrics > 0.0 && openmetrics >= text {
            Exposition::OpenMetrics
        } else {
            Exposition::Prometheus
        }
    }
}

/// OpenMetrics text, as `prometheus-client` writes it, in the Prometheus
/// text format 0.0.4: a counter's `# HELP` and `# TYPE` name its samples
/// (`_total` added), `# UNIT` lines and the closing `# EOF` go.
pub fn to_prometheus_text(openmetrics: &str) -> String {
    let mut out = String::with_capacity(openmetrics.len());
    let mut counters: Vec<&str> = Vec::new();
    // `# TYPE x counter` comes after `# HELP x`: find the counters first.
    for line in openmetrics.lines() {
        if let Some(name) = line
            .strip_prefix("# TYPE ")
            .and_then(|rest| rest.strip_suffix(" counter"))
        {
            counters.push(name);
        }
    }
    for line in openmetrics.lines() {
        if line == "# EOF" || line.starts_with("# UNIT ") {
            continue;
        }
        let meta = ["# HELP ", "# TYPE "]
            .into_iter()
            .find_map(|p| line.strip_prefix(p).map(|rest| (p, rest)));
        match meta {
            Some((prefix, rest)) => {
                let (name, tail) = rest.split_once(' ').unwrap_or((rest, ""));
                let total = if counters.contains(&name) {
                    "_total"
                } else {
                    ""
                };
                out.push_str(prefix);
                out.push_str(name);
                out.push_str(total);
                if !tail.is_empty() {
                    out.push(' ');
                    out.push_str(tail);
                }
            }
            None => out.push_str(line),
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_format_follows_accept_as_prometheus_clients_choose() {
        let om = Exposition::OpenMetrics;
        let text = Exposition::Prometheus;
        for (accept, want) in [
            (None, text),
            (Some("*/*"), text),
            (Some("text/plain;version=0.0.4;q=0.3,*/*;q=0.2"), text),
            (
                Some("application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1"),
                om,
            ),
            (Some("application/openmetrics-text; version=1.0.0"), om),
            (Some("application/openmetrics-text;q=0, text/plain"), text),
            (Some("text/plain, application/openmetrics-text;q=0.5"), text),
        ] {
            assert_eq!(Exposition::from_accept(accept.map(str::as_bytes)), want, "{accept:?}");
        }
    }

    #[test]
    fn counters_are_named_by_their_samples_and_eof_goes() {
        let om = "# HELP unflat_requests Responses sent.\n# TYPE unflat_requests counter\n\
                  unflat_requests_total{route=\"/\",status=\"200\"} 3\n\
                  # HELP unflat_open_connections Open.\n# TYPE unflat_open_connections gauge\n\
                  unflat_open_connections 1\n# UNIT x_seconds seconds\n# EOF\n";
        assert_eq!(
            to_prometheus_text(om),
            "# HELP unflat_requests_total Responses sent.\n# TYPE unflat_requests_total counter\n\
             unflat_requests_total{route=\"/\",status=\"200\"} 3\n\
             # HELP unflat_open_connections Open.\n# TYPE unflat_open_connections gauge\n\
             unflat_open_connections 1\n"
        );
    }
}
