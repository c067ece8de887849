package bundlereader

import (
	"bufio"
	"bytes"
	"path"
	"strings"
)

// ignoreFile is the name of the file that lists, gitignore-style, the files
// of a directory that are not resources.
const ignoreFile = ".fleetignore"

// ignoreRule is one line of a .fleetignore.
type ignoreRule struct {
	base     string   // directory of the .fleetignore, relative to the bundle ("" for its root)
	segments []string // the pattern split at "/"
	anchored bool     // matches paths relative to base, not base names
	dirOnly  bool     // trailing "/": matches directories only
	negate   bool     // leading "!": re-includes what an earlier rule left out
}

// ignoreRules are the rules in force in one directory: those of the
// .fleetignore files of the directory and its parents within the bundle,
// outermost first. The last rule that matches decides, as in git.
type ignoreRules []ignoreRule

// parseIgnore reads the rules of a .fleetignore found in base.
func parseIgnore(data []byte, base string) ignoreRules {
	var rules ignoreRules
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := strings.TrimRight(sc.Text(), " \t\r")
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		r := ignoreRule{base: base}
		if strings.HasPrefix(line, "!") {
			r.negate = true
			line = line[1:]
		} else if strings.HasPrefix(line, `\`) {
			line = line[1:] // \# and \! stand for themselves
		}
		if strings.HasSuffix(line, "/") {
			r.dirOnly = true
			line = strings.TrimRight(line, "/")
		}
		// A slash at the start or in the middle ties the pattern to the
		// directory of the .fleetignore.
		r.anchored = strings.Contains(line, "/")
		// But for Fleet's one directory pattern: NAME/* leaves out every
		// directory named NAME below the .fleetignore, at any depth (a
		// chart's tests/, say, with tests/*). NAME is a plain name there.
		if name, ok := strings.CutSuffix(line, "/*"); ok && !r.negate && name != "" && !strings.ContainsAny(name, `/*?[\`) {
			line, r.anchored, r.dirOnly = name, false, true
		}
		line = strings.TrimLeft(line, "/")
		if line == "" {
			continue
		}
		r.segments = strings.Split(line, "/")
		rules = append(rules, r)
	}
	return rules
}

// ignored tells whether the file or directory at rel (slash separated,
// relative to the bundle) is left out.
func (rs ignoreRules) ignored(rel string, isDir bool) bool {
	ignored := false
	for _, r := range rs {
		if r.matches(rel, isDir) {
			ignored = !r.negate
		}
	}
	return ignored
}

func (r ignoreRule) matches(rel string, isDir bool) bool {
	if r.dirOnly && !isDir {
		return false
	}
	if r.base != "" {
		var ok bool
		if rel, ok = strings.CutPrefix(rel, r.base+"/"); !ok {
			return false
		}
	}
	if !r.anchored {
		ok, _ := path.Match(r.segments[0], path.Base(rel))
		return ok
	}
	return matchSegments(r.segments, strings.Split(rel, "/"))
}

// matchSegments matches path segments against pattern segments, where "**"
// stands for any number of segments.
func matchSegments(pat, name []string) bool {
	for len(pat) > 0 {
		if pat[0] == "**" {
			rest := pat[1:]
			if len(rest) == 0 {
				return true
			}
			for i := 0; i <= len(name); i++ {
				if matchSegments(rest, name[i:]) {
					return true
				}
			}
			return false
		}
		if len(name) == 0 {
			return false
		}
		if ok, _ := path.Match(pat[0], name[0]); !ok {
			return false
		}
		pat, name = pat[1:], name[1:]
	}
	return len(name) == 0
}
