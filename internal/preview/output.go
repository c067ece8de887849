package preview

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
)

// Formats Write knows.
const (
	Text     = "text"
	Markdown = "markdown"
	JSON     = "json"
)

// Write writes r in format.
func Write(w io.Writer, r *Result, format string) error {
	switch format {
	case Text:
		writeText(w, r)
	case Markdown:
		writeMarkdown(w, r)
	case JSON:
		data, err := json.MarshalIndent(r, "", "  ")
		if err != nil {
			return err
		}
		_, err = fmt.Fprintln(w, string(data))
		return err
	default:
		return fmt.Errorf("--output %q: give text, markdown or json", format)
	}
	return nil
}

func writeText(w io.Writer, r *Result) {
	fmt.Fprintf(w, "# %s -> %s: %d cluster(s) change\n", r.From, r.To, len(r.Clusters))
	for _, c := range r.Clusters {
		fmt.Fprintf(w, "cluster %s\n", c.Cluster)
		for _, b := range c.Bundles {
			fmt.Fprintf(w, "  bundle %s %s\n", b.Bundle, b.Change)
			for _, o := range b.Objects {
				fmt.Fprintf(w, "    %s %s\n", o.Object, o.Change)
				for _, f := range o.Fields {
					fmt.Fprintf(w, "      %s: %s -> %s\n", f.Path, jsonText(f.From), jsonText(f.To))
				}
			}
		}
	}
	for _, e := range r.Errors {
		fmt.Fprintf(w, "error: %s\n", e)
	}
}

func code(s string) string { return "`" + strings.ReplaceAll(s, "`", "'") + "`" }

func writeMarkdown(w io.Writer, r *Result) {
	fmt.Fprintf(w, "### Fleet preview: %s → %s\n\n", code(r.From), code(r.To))
	if !r.Changes() {
		fmt.Fprintf(w, "No cluster changes.\n")
	} else {
		fmt.Fprintf(w, "%d cluster(s) change.\n\n| cluster | bundle | change | objects |\n|---|---|---|---|\n", len(r.Clusters))
		for _, c := range r.Clusters {
			for _, b := range c.Bundles {
				objs := make([]string, 0, len(b.Objects))
				for _, o := range b.Objects {
					objs = append(objs, code(o.Object)+" "+o.Change)
				}
				fmt.Fprintf(w, "| %s | %s | %s | %s |\n", code(c.Cluster), code(b.Bundle), b.Change, strings.Join(objs, "<br>"))
			}
		}
		for _, c := range r.Clusters {
			fmt.Fprintf(w, "\n<details><summary>%s</summary>\n\n", c.Cluster)
			for _, b := range c.Bundles {
				for _, o := range b.Objects {
					fmt.Fprintf(w, "- %s %s: %s\n", code(b.Bundle), code(o.Object), o.Change)
					for _, f := range o.Fields {
						fmt.Fprintf(w, "  - %s: %s → %s\n", code(f.Path), code(jsonText(f.From)), code(jsonText(f.To)))
					}
				}
			}
			fmt.Fprintf(w, "\n</details>\n")
		}
	}
	if len(r.Errors) > 0 {
		fmt.Fprintf(w, "\n**Errors**\n\n")
		for _, e := range r.Errors {
			fmt.Fprintf(w, "- %s\n", e)
		}
	}
}
