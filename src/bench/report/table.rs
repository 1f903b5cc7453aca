//! One table model for every report that prints a table: columns (a header; numbers aligned
//! right) and rows of text cells. A table is written once and laid out per format, as
//! hyperfine's markup exports do: each layout walks the same header, divider and rows, and
//! gives only its row syntax — aligned terminal text, Markdown, CSV. The reports decide what
//! the cells say; this module only how a cell is laid out.

/// A column of a [`Table`].
#[derive(Debug, Clone, PartialEq)]
pub struct Column {
    /// Its header.
    pub header: String,
    /// It holds numbers: aligned right.
    pub numeric: bool,
}

impl Column {
    /// A column of text, aligned left.
    pub fn text(header: &str) -> Self {
        Self { header: header.into(), numeric: false }
    }

    /// A column of numbers, aligned right.
    pub fn number(header: &str) -> Self {
        Self { header: header.into(), numeric: true }
    }
}

/// A table of text cells: its columns, then one line of cells per row (as many as columns).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Table {
    /// The columns, in order.
    pub columns: Vec<Column>,
    /// The rows, each a cell per column.
    pub rows: Vec<Vec<String>>,
}

impl Table {
    /// Terminal text: each column as wide as its widest cell, two spaces between columns,
    /// numbers aligned right, no trailing spaces.
    pub fn aligned(&self) -> String {
        let widths: Vec<usize> = (0..self.columns.len())
            .map(|j| self.lines().map(|line| line[j].chars().count()).max().unwrap_or(0))
            .collect();
        self.write(None, |cells| {
            let padded: Vec<String> = cells
                .iter()
                .zip(&self.columns)
                .zip(&widths)
                .map(|((cell, column), &width)| {
                    let pad = " ".repeat(width - cell.chars().count());
                    if column.numeric {
                        format!("{pad}{cell}")
                    } else {
                        format!("{cell}{pad}")
                    }
                })
                .collect();
            format!("{}\n", padded.join("  ").trim_end())
        })
    }

    /// A Markdown table, numbers aligned right; every cell escaped ([`escape_markdown`]).
    pub fn markdown(&self) -> String {
        let divider = self.columns.iter().map(|c| if c.numeric { "---:" } else { "---" });
        let divider = format!("| {} |\n", divider.collect::<Vec<_>>().join(" | "));
        self.write(Some(divider), |cells| {
            let escaped: Vec<String> = cells.iter().map(|cell| escape_markdown(cell)).collect();
            format!("| {} |\n", escaped.join(" | "))
        })
    }

    /// CSV: a header line, then a line per row, fields quoted as RFC 4180 wants.
    pub fn csv(&self) -> String {
        self.write(None, |cells| {
            let quoted: Vec<String> = cells.iter().map(|cell| quote(cell)).collect();
            format!("{}\n", quoted.join(","))
        })
    }

    /// The header, then every row, as text cells.
    fn lines(&self) -> impl Iterator<Item = Vec<&str>> {
        let header = self.columns.iter().map(|c| c.header.as_str()).collect();
        let rows = self.rows.iter().map(|row| row.iter().map(String::as_str).collect());
        std::iter::once(header).chain(rows)
    }

    /// The header line, `divider` after it where the format has one, then a line per row.
    fn write(&self, divider: Option<String>, line: impl Fn(&[&str]) -> String) -> String {
        let mut lines = self.lines().map(|cells| line(&cells));
        let mut out = lines.next().unwrap_or_default();
        out.push_str(&divider.unwrap_or_default());
        out.extend(lines);
        out
    }
}

/// Escapes what Markdown would read as table cells or emphasis; code spans stay as they are.
pub fn escape_markdown(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut in_code = false;
    for c in text.chars() {
        if c == '`' {
            in_code = !in_code;
        } else if !in_code && matches!(c, '|' | '*' | '_' | '<' | '>') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// A field quoted as RFC 4180 wants where it holds a comma, a quote or a line break.
fn quote(field: &str) -> String {
    if field.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", field.replace('"', "\"\""))
    } else {
        field.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table() -> Table {
        Table {
            columns: vec![Column::text("name"), Column::number("samples/s")],
            rows: vec![vec!["a_b, *c*".into(), "12.5".into()], vec!["d".into(), "7".into()]],
        }
    }

    #[test]
    fn one_table_in_each_format() {
        assert_eq!(
            table().aligned(),
            "name      samples/s\na_b, *c*       12.5\nd                 7\n"
        );
        assert_eq!(
            table().markdown(),
            "| name | samples/s |\n| --- | ---: |\n| a\\_b, \\*c\\* | 12.5 |\n| d | 7 |\n"
        );
        assert_eq!(table().csv(), "name,samples/s\n\"a_b, *c*\",12.5\nd,7\n");
    }

    #[test]
    fn escapes_outside_code_spans() {
        assert_eq!(
            escape_markdown("a|b *c* `images = [\"u8\"]` d_e"),
            "a\\|b \\*c\\* `images = [\"u8\"]` d\\_e"
        );
        assert_eq!(escape_markdown("`a_b`"), "`a_b`");
    }

    #[test]
    fn quotes_only_what_needs_it() {
        assert_eq!(quote("g1"), "g1");
        assert_eq!(quote("a,b"), "\"a,b\"");
        assert_eq!(quote("say \"hi\""), "\"say \"\"hi\"\"\"");
    }
}
