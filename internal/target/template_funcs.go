package target

import (
	"fmt"
	"math"
	"reflect"
	"strings"
	"text/template"
	"text/template/parse"

	"github.com/Masterminds/sprig/v3"
)

// refusedFuncs are the sprig functions values templates may not call, with
// the reason given to whoever calls them. Fleet removes env and expandenv
// (and Helm's include and tpl, which sprig does not have); the manager also
// refuses network access and the functions that generate RSA keys, seconds
// of work that would be redone on every reconcile of every cluster.
var refusedFuncs = map[string]string{
	"env":               "it would read the manager's environment",
	"expandenv":         "it would read the manager's environment",
	"getHostByName":     "it would make a DNS lookup from the manager",
	"genPrivateKey":     "it generates a key on every reconcile; put the key in the Cluster's templateValues or a Secret instead",
	"genCA":             "it generates a key on every reconcile; use genCAWithKey with a key from the Cluster's templateValues",
	"genSelfSignedCert": "it generates a key on every reconcile; use genSelfSignedCertWithKey with a key from the Cluster's templateValues",
	"genSignedCert":     "it generates a key on every reconcile; use genSignedCertWithKey with a key from the Cluster's templateValues",
}

// expensiveFuncs are slow on purpose; each call counts against
// MaxTemplateExpensiveCalls.
var expensiveFuncs = map[string]bool{
	"bcrypt": true, "htpasswd": true, "derivePassword": true,
	"genCAWithKey": true, "genSelfSignedCertWithKey": true, "genSignedCertWithKey": true,
}

// templateFuncs are the functions values templates may call, as Fleet offers
// them: sprig's text functions, plus text/template's builtins that make
// strings (overridden here only to bound them). Each is wrapped per rendering
// by guardFuncs.
var templateFuncs = func() map[string]reflect.Value {
	out := map[string]reflect.Value{}
	for name, f := range sprig.TxtFuncMap() {
		if _, refused := refusedFuncs[name]; !refused {
			out[name] = reflect.ValueOf(f)
		}
	}
	for name, f := range map[string]interface{}{
		"printf":   boundedPrintf,
		"print":    fmt.Sprint,
		"println":  fmt.Sprintln,
		"html":     template.HTMLEscaper,
		"js":       template.JSEscaper,
		"urlquery": template.URLQueryEscaper,
	} {
		out[name] = reflect.ValueOf(f)
	}
	return out
}()

// refusedStubs let templates that name a refused function parse, so that
// checkRefused can say why it is refused; they never run.
var refusedStubs = func() template.FuncMap {
	out := template.FuncMap{}
	for name := range refusedFuncs {
		out[name] = func(...interface{}) (string, error) { return "", fmt.Errorf("not allowed") }
	}
	return out
}()

// guardFuncs wraps every template function so that it counts against b:
// its arguments and result must each be at most MaxTemplateValue and count
// against MaxTemplateWork, and the functions that can make a value much
// larger than their arguments (repeat, indent, replace, until, ...) are
// refused beforehand when they would.
func guardFuncs(b *budget) template.FuncMap {
	out := make(template.FuncMap, len(templateFuncs)+len(refusedStubs))
	for name, f := range refusedStubs {
		out[name] = f
	}
	for name, fn := range templateFuncs {
		out[name] = guard(name, fn, b)
	}
	return out
}

// guard returns fn wrapped as described at guardFuncs. A refusal panics with
// the error, which text/template turns into the template's error.
func guard(name string, fn reflect.Value, b *budget) interface{} {
	t := fn.Type()
	pre := preChecks[name]
	return reflect.MakeFunc(t, func(args []reflect.Value) []reflect.Value {
		if err := b.beforeCall(name, args, pre); err != nil {
			panic(err)
		}
		var out []reflect.Value
		if t.IsVariadic() {
			out = fn.CallSlice(args)
		} else {
			out = fn.Call(args)
		}
		if len(out) > 0 {
			size := sizeOf(out[0], 0, MaxTemplateValue+1)
			if size > MaxTemplateValue {
				panic(fmt.Errorf("%s made a value larger than %d bytes: make the values smaller", name, MaxTemplateValue))
			}
			if err := b.spend(size); err != nil {
				panic(err)
			}
		}
		return out
	}).Interface()
}

func (b *budget) beforeCall(name string, args []reflect.Value, pre func([]reflect.Value) error) error {
	if expensiveFuncs[name] {
		b.expensive--
		if b.expensive < 0 {
			return fmt.Errorf("%s may be called at most %d times in one cluster's values: it is slow on purpose", name, MaxTemplateExpensiveCalls)
		}
	}
	cost := callCost
	for _, a := range args {
		size := sizeOf(a, 0, MaxTemplateValue+1)
		if size > MaxTemplateValue {
			return fmt.Errorf("%s got an argument larger than %d bytes: make the values smaller", name, MaxTemplateValue)
		}
		cost += size
	}
	if err := b.spend(cost); err != nil {
		return err
	}
	if pre != nil {
		return pre(args)
	}
	return nil
}

// preChecks refuse, before the call, what would make a value too large or
// take too long. Arguments have the function's parameter types; a variadic
// function's last argument is a slice.
var preChecks = map[string]func(args []reflect.Value) error{
	"repeat": func(a []reflect.Value) error {
		return notOver("repeat", float64(a[0].Int())*float64(a[1].Len()))
	},
	"indent":  indentCheck("indent"),
	"nindent": indentCheck("nindent"),
	"replace": func(a []reflect.Value) error {
		old, repl, src := a[0].String(), a[1].String(), a[2].String()
		return notOver("replace", float64(len(src))+float64(strings.Count(src, old))*float64(len(repl)))
	},
	"until": func(a []reflect.Value) error {
		return listNotOver("until", math.Abs(float64(a[0].Int())))
	},
	"untilStep": func(a []reflect.Value) error {
		start, stop, step := float64(a[0].Int()), float64(a[1].Int()), float64(a[2].Int())
		if step == 0 {
			return nil
		}
		return listNotOver("untilStep", math.Abs((stop-start)/step))
	},
	"seq": func(a []reflect.Value) error {
		p := a[0]
		var start, stop, step float64 = 1, 0, 1
		switch p.Len() {
		case 1:
			stop = float64(p.Index(0).Int())
		case 2:
			start, stop = float64(p.Index(0).Int()), float64(p.Index(1).Int())
		case 3:
			start, step, stop = float64(p.Index(0).Int()), float64(p.Index(1).Int()), float64(p.Index(2).Int())
		}
		if step == 0 {
			step = 1
		}
		return listNotOver("seq", math.Abs((stop-start)/step)+1)
	},
	"randAlphaNum": countCheck("randAlphaNum"),
	"randAlpha":    countCheck("randAlpha"),
	"randAscii":    countCheck("randAscii"),
	"randNumeric":  countCheck("randNumeric"),
	"randBytes":    countCheck("randBytes"),
	"join": func(a []reflect.Value) error {
		n := 0
		if l := reflect.Indirect(a[1]); l.Kind() == reflect.Interface && !l.IsNil() {
			l = l.Elem()
			if l.Kind() == reflect.Slice || l.Kind() == reflect.Array {
				n = l.Len()
			}
		}
		return notOver("join", float64(n)*float64(a[0].Len())+float64(sizeOf(a[1], 0, MaxTemplateValue+1)))
	},
	"wrapWith": func(a []reflect.Value) error {
		width := max(float64(a[0].Int()), 1)
		sep, s := float64(a[1].Len()), float64(a[2].Len())
		return notOver("wrapWith", (s/width+1)*sep+s)
	},
	"regexReplaceAll":            regexReplaceCheck("regexReplaceAll", true),
	"mustRegexReplaceAll":        regexReplaceCheck("mustRegexReplaceAll", true),
	"regexReplaceAllLiteral":     regexReplaceCheck("regexReplaceAllLiteral", false),
	"mustRegexReplaceAllLiteral": regexReplaceCheck("mustRegexReplaceAllLiteral", false),
	"chunk":                      chunkCheck("chunk"),
	"mustChunk":                  chunkCheck("mustChunk"),
	"uniq":                       func(a []reflect.Value) error { return quadraticCheck("uniq", listLen(a[0]), listLen(a[0])) },
	"mustUniq":                   func(a []reflect.Value) error { return quadraticCheck("mustUniq", listLen(a[0]), listLen(a[0])) },
	"without":                    func(a []reflect.Value) error { return quadraticCheck("without", listLen(a[0]), a[1].Len()) },
	"mustWithout":                func(a []reflect.Value) error { return quadraticCheck("mustWithout", listLen(a[0]), a[1].Len()) },
	"set":                        func(a []reflect.Value) error { return noCycle("set", a[0], a[2]) },
	"merge":                      mergeCheck("merge"),
	"mustMerge":                  mergeCheck("mustMerge"),
	"mergeOverwrite":             mergeCheck("mergeOverwrite"),
	"mustMergeOverwrite":         mergeCheck("mustMergeOverwrite"),
}

func notOver(name string, estimate float64) error {
	if estimate > MaxTemplateValue {
		return fmt.Errorf("%s would make a value of about %.0f bytes, more than %d: make it smaller", name, estimate, MaxTemplateValue)
	}
	return nil
}

func listNotOver(name string, n float64) error {
	if n > MaxTemplateIterations {
		return fmt.Errorf("%s would make a list of %.0f items, more than %d: make it shorter", name, n, MaxTemplateIterations)
	}
	return nil
}

func countCheck(name string) func([]reflect.Value) error {
	return func(a []reflect.Value) error { return notOver(name, float64(a[0].Int())*4/3) }
}

func indentCheck(name string) func([]reflect.Value) error {
	return func(a []reflect.Value) error {
		s := a[1].String()
		return notOver(name, float64(a[0].Int())*float64(strings.Count(s, "\n")+2)+float64(len(s)))
	}
}

// regexReplaceCheck bounds the replacement of every possible match of a
// regular expression in s (at most len(s)+1 of them); with expand, each $
// reference in the replacement may stand for all of s.
func regexReplaceCheck(name string, expand bool) func([]reflect.Value) error {
	return func(a []reflect.Value) error {
		s, repl := float64(a[1].Len()), a[2].String()
		each := float64(len(repl))
		if expand {
			each += float64(strings.Count(repl, "$")) * s
		}
		return notOver(name, s+(s+1)*each)
	}
}

func chunkCheck(name string) func([]reflect.Value) error {
	return func(a []reflect.Value) error {
		if a[0].Int() < 1 {
			return fmt.Errorf("%s: the chunk size must be at least 1", name)
		}
		return nil
	}
}

// quadraticCheck bounds functions that compare every item of one list with
// every item of another.
func quadraticCheck(name string, n, m int) error {
	if float64(n)*float64(m) > 100*MaxTemplateIterations {
		return fmt.Errorf("%s on lists of %d and %d items would take too long: make them shorter", name, n, m)
	}
	return nil
}

func listLen(v reflect.Value) int {
	for v.Kind() == reflect.Interface && !v.IsNil() {
		v = v.Elem()
	}
	if v.Kind() == reflect.Slice || v.Kind() == reflect.Array {
		return v.Len()
	}
	return 0
}

// noCycle refuses to put into the dict d a value that holds d: the dict
// would contain itself, and printing it would never end.
func noCycle(name string, d, v reflect.Value) error {
	if d.Kind() != reflect.Map || d.IsNil() {
		return nil
	}
	limit := MaxTemplateValue
	if reaches(v, d.Pointer(), &limit) {
		return fmt.Errorf("%s would put a dict into itself", name)
	}
	return nil
}

func mergeCheck(name string) func([]reflect.Value) error {
	return func(a []reflect.Value) error {
		srcs := a[1]
		for i := range srcs.Len() {
			src := srcs.Index(i)
			if src.Kind() != reflect.Map || src.IsNil() {
				continue
			}
			it := src.MapRange()
			for it.Next() {
				if err := noCycle(name, a[0], it.Value()); err != nil {
					return err
				}
			}
		}
		return nil
	}
}

// checkRefused reports the first refused function a template names.
func checkRefused(n parse.Node) error {
	switch n := n.(type) {
	case *parse.ListNode:
		if n == nil {
			return nil
		}
		for _, c := range n.Nodes {
			if err := checkRefused(c); err != nil {
				return err
			}
		}
	case *parse.ActionNode:
		return checkRefused(n.Pipe)
	case *parse.PipeNode:
		if n == nil {
			return nil
		}
		for _, c := range n.Cmds {
			if err := checkRefused(c); err != nil {
				return err
			}
		}
	case *parse.CommandNode:
		for _, a := range n.Args {
			if err := checkRefused(a); err != nil {
				return err
			}
		}
	case *parse.ChainNode:
		return checkRefused(n.Node)
	case *parse.IdentifierNode:
		if why, ok := refusedFuncs[n.Ident]; ok {
			return fmt.Errorf("function %q is not allowed in values templates: %s", n.Ident, why)
		}
	case *parse.IfNode:
		return checkRefusedBranch(&n.BranchNode)
	case *parse.WithNode:
		return checkRefusedBranch(&n.BranchNode)
	case *parse.RangeNode:
		return checkRefusedBranch(&n.BranchNode)
	}
	return nil
}

func checkRefusedBranch(b *parse.BranchNode) error {
	for _, n := range []parse.Node{b.Pipe, b.List, b.ElseList} {
		if err := checkRefused(n); err != nil {
			return err
		}
	}
	return nil
}
