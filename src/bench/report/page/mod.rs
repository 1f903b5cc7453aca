//! A study's report as one self-contained HTML page (`report.html`): the answer and the verdict
//! on top, then interactive plots drawn by plotly.js (embedded: the page opens offline, fetches
//! nothing), then the report's Markdown rendered, its tables sortable. A study lays out its own
//! plots ([`sweep`]); [`Page`] is the frame every page shares.

pub mod sweep;

use plotly::layout::{HoverMode, Layout};
use plotly::{Configuration, Plot};
use pulldown_cmark::{html, Event, Options, Parser, Tag, TagEnd};

/// The page's file, beside report.md.
pub const PAGE_FILE: &str = "report.html";

/// Sorting a table by a click on its header: numbers as numbers (a leading figure read), text as
/// text; a second click reverses.
const SORT_SCRIPT: &str = r#"
document.querySelectorAll("table").forEach(function (table) {
  table.querySelectorAll("th").forEach(function (th, column) {
    th.title = "sort";
    th.addEventListener("click", function () {
      var body = table.tBodies[0];
      var rows = Array.prototype.slice.call(body.rows);
      var down = th.dataset.order !== "down";
      th.dataset.order = down ? "down" : "up";
      var key = function (row) {
        var text = row.cells[column] ? row.cells[column].textContent.trim() : "";
        var number = parseFloat(text.replace(/^[*\s]+/, ""));
        return isNaN(number) ? text : number;
      };
      rows.sort(function (a, b) {
        var x = key(a), y = key(b);
        var order = typeof x === typeof y ? (x < y ? -1 : x > y ? 1 : 0) : typeof x === "number" ? -1 : 1;
        return down ? order : -order;
      });
      rows.forEach(function (row) { body.appendChild(row); });
    });
  });
});
"#;

const STYLE: &str = "body{font-family:sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;\
color:#222}h1{font-size:1.6em}.meta{color:#555}.answer{background:#f3f7fb;border-left:4px solid \
#1f77b4;padding:.6em 1em}.missing{background:#fff4e5;border-left:4px solid #ff7f0e;padding:.6em \
1em}.plot{height:460px;margin:1em 0}table{border-collapse:collapse;font-size:.9em}th,td{border:1px \
solid #ccc;padding:.2em .5em;text-align:right}th{cursor:pointer;background:#f4f4f4}";

/// A page: its title, the lines under it (machine, versions, date), the answer, the plots and
/// the rest of the report.
#[derive(Debug, Default)]
pub struct Page {
    title: String,
    meta: Vec<String>,
    answer: Vec<String>,
    missing: Vec<String>,
    plots: Vec<(String, String)>,
    details: String,
}

impl Page {
    /// A page titled `title`.
    pub fn new(title: &str) -> Self {
        Self { title: title.to_string(), ..Self::default() }
    }

    /// A line under the title (where and when it was measured).
    pub fn meta(&mut self, line: String) {
        self.meta.push(line);
    }

    /// A paragraph of the answer, on top.
    pub fn answer(&mut self, paragraph: String) {
        self.answer.push(paragraph);
    }

    /// What the page cannot show and why (results missing, cut short, or older), on top.
    pub fn missing(&mut self, line: String) {
        self.missing.push(line);
    }

    /// A plot, under its heading; `id` names its element (unique in the page).
    pub fn plot(&mut self, id: &str, heading: &str, plot: &Plot) {
        let html = plot.to_inline_html(Some(id));
        self.plots.push((heading.to_string(), format!("<div class=\"plot\">{html}</div>")));
    }

    /// The rest of the report, as Markdown (its images left out: the plots stand for them).
    pub fn details(&mut self, markdown: &str) {
        self.details = markdown_html(markdown);
    }

    /// The whole page.
    pub fn render(&self) -> String {
        let mut out =
            String::from("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">");
        out.push_str(&format!("<title>{}</title><style>{STYLE}</style>", escape(&self.title)));
        out.push_str(&plotly_js());
        out.push_str(&format!("</head><body><h1>{}</h1>", escape(&self.title)));
        for line in &self.meta {
            out.push_str(&format!("<p class=\"meta\">{}</p>", escape(line)));
        }
        for line in &self.missing {
            out.push_str(&format!("<p class=\"missing\">{}</p>", escape(line)));
        }
        for paragraph in &self.answer {
            out.push_str(&format!("<p class=\"answer\">{}</p>", escape(paragraph)));
        }
        for (heading, plot) in &self.plots {
            out.push_str(&format!("<h2>{}</h2>{plot}", escape(heading)));
        }
        if !self.details.is_empty() {
            out.push_str(&format!("<section class=\"details\">{}</section>", self.details));
        }
        out.push_str(&format!("<script>{SORT_SCRIPT}</script></body></html>\n"));
        out
    }
}

/// plotly.js's cartesian bundle (scatter, bar, heatmap: every trace a page draws), of the
/// version the plotly crate writes its figures for: a third of the full bundle's bytes, and a
/// page that loads in about half the time (docs/report-page.md). MIT licensed,
/// assets/plotly/LICENSE.
const PLOTLY_JS: &str = include_str!("../../../../assets/plotly/plotly-cartesian.min.js");

/// plotly.js as one inline script.
fn plotly_js() -> String {
    format!("<script type=\"text/javascript\">{PLOTLY_JS}</script>")
}

/// Markdown as HTML, its images left out.
fn markdown_html(markdown: &str) -> String {
    let mut in_image = false;
    let events = Parser::new_ext(markdown, Options::ENABLE_TABLES).filter(|event| match event {
        Event::Start(Tag::Image { .. }) => {
            in_image = true;
            false
        }
        Event::End(TagEnd::Image) => {
            in_image = false;
            false
        }
        _ => !in_image,
    });
    let mut out = String::new();
    html::push_html(&mut out, events);
    out
}

/// A plot of the page's look: no logo, the width of the page, hovers at the nearest point.
pub fn plot_of(layout: Layout) -> Plot {
    let mut plot = Plot::new();
    plot.set_layout(layout.hover_mode(HoverMode::Closest));
    plot.set_configuration(Configuration::new().display_logo(false).responsive(true));
    plot
}

/// A time as `2026-11-29 10:13 UTC`, from seconds since the Unix epoch.
pub fn utc(unix_s: u64) -> String {
    let at = i64::try_from(unix_s).ok().and_then(|s| jiff::Timestamp::from_second(s).ok());
    at.map_or_else(
        || format!("{unix_s} s after 1970"),
        |t| t.strftime("%Y-%m-%d %H:%M UTC").to_string(),
    )
}

/// Text as HTML text.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let _ = pulldown_cmark_escape::escape_html(&mut out, text);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_embedded_plotly_js_is_the_version_the_crate_writes_for() {
        let cdn = Plot::online_cdn_js();
        let version = cdn.split("plotly-").nth(1).and_then(|v| v.split(".min.js").next());
        let version = version.expect("the crate names its plotly.js");
        assert!(PLOTLY_JS[..200].contains(&format!("plotly.js (cartesian - minified) v{version}")));
    }

    #[test]
    fn a_page_embeds_plotly_and_fetches_nothing() {
        let mut page = Page::new("feedbench <report>");
        page.details("# x\n\n![plot](train.svg)\n\n| a | b |\n|---|---|\n| 1 | 2 |\n");
        let html = page.render();
        assert!(html.contains("<title>feedbench &lt;report&gt;</title>"));
        assert!(html.contains("Plotly"), "plotly.js inline");
        assert!(!html.contains("<script src"), "no script fetched");
        // The cartesian bundle, 1.3 MB, not the full one (4.7 MB) and its MathJax (2.1).
        assert!(html.len() < 1_500_000, "{} bytes", html.len());
        assert!(!html.contains("train.svg") && !html.contains("<img"), "images left out");
        assert!(html.contains("<table>") && html.contains("<td>2</td>"), "tables rendered");
    }
}
