package static

import (
	"fmt"
	"strings"
)

// yamlSyntax turns the YAML library's error about src into a line and a
// message. The library names the line where it noticed the mistake,
// often that of the enclosing block, before or after the culprit; for
// its common messages the text is scanned for the culprit (the first
// line indented with a tab, the bracket left open, the key without a
// colon, the line indented unlike its siblings) and the message says how
// to fix it. Otherwise the message says that the mistake is at or before
// the line the parser names.
func yamlSyntax(src []byte, err error) (int, string) {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	at := yamlErrLine(err)
	detail := msg
	if at > 0 {
		detail = strings.TrimPrefix(msg, fmt.Sprintf("line %d: ", at))
	}
	lines := strings.Split(strings.ReplaceAll(string(src), "\r\n", "\n"), "\n")
	parser := fmt.Sprintf("(the parser: %s)", msg)
	switch {
	case strings.Contains(detail, "tab") || strings.Contains(detail, "cannot start any token"):
		if l := firstTabIndent(lines); l > 0 {
			return l, fmt.Sprintf("not valid YAML: line %d is indented with a tab; indent with spaces, not tabs %s", l, parser)
		}
	case strings.Contains(detail, "did not find expected ',' or ']'"), strings.Contains(detail, "did not find expected ',' or '}'"),
		strings.Contains(detail, "did not find expected node content"), strings.Contains(detail, "did not find expected flow"):
		if l, b := openBracket(lines); l > 0 {
			return l, fmt.Sprintf("not valid YAML: the %c opened on line %d is not closed; close the %c opened on line %d with %c %s", b, l, b, l, closing(b), parser)
		}
	case strings.Contains(detail, "mapping values are not allowed"):
		if at > 1 && at <= len(lines) {
			p := prevContent(lines, at-1)
			// A line without a colon followed by a deeper one: YAML reads
			// both as one plain scalar, then finds the second's colon.
			if p > 0 && !hasKeyColon(lines[p-1]) && indentOf(lines[at-1]) > indentOf(lines[p-1]) {
				return p, fmt.Sprintf("not valid YAML: %q on line %d has no colon; a key needs a colon and a space after it (key: value) %s", strings.TrimSpace(lines[p-1]), p, parser)
			}
			if p > 0 && indentOf(lines[at-1]) > indentOf(lines[p-1]) {
				return at, fmt.Sprintf("not valid YAML: line %d is indented under line %d, whose key already has a value; this item is indented differently from its siblings: indent it as they are %s", at, p, parser)
			}
		}
	case strings.Contains(detail, "did not find expected <document start>"):
		// The first lines are indented: YAML ends the document's root
		// at the first line indented less, then expects another.
		if first, l := shallowerThanFirst(lines); l > 0 {
			what := fmt.Sprintf("indent line %d as it belongs, or add the key it is the value of", first)
			if last := prevContent(lines, l-1); last > first {
				what = fmt.Sprintf("indent lines %d to %d as they belong, or add the key they are the value of", first, last)
			}
			return l, fmt.Sprintf("not valid YAML: line %d is indented less than line %d, where the schedule begins (%d spaces); the schedule's top level starts at the beginning of the line: %s (hyperepochs:, clients:, runnables:) above line %d %s",
				l, first, indentOf(lines[first-1]), what, first, parser)
		}
	case strings.Contains(detail, "did not find expected '-' indicator"), strings.Contains(detail, "did not find expected key"),
		strings.Contains(detail, "block sequence entries are not allowed"):
		if l, n, around := oddIndent(lines); l > 0 {
			return l, fmt.Sprintf("not valid YAML: line %d is indented by %d spaces, the lines around it by %s; this item is indented differently from its siblings: indent it as they are %s", l, n, around, parser)
		}
	}
	if at > 0 {
		return at, fmt.Sprintf("not valid YAML at or before line %d: %s", at, detail)
	}
	return 0, "not valid YAML: " + msg
}

func closing(b byte) byte {
	if b == '[' {
		return ']'
	}
	return '}'
}

// content reports whether line holds more than spaces and a comment.
func content(line string) bool {
	t := strings.TrimSpace(line)
	return t != "" && !strings.HasPrefix(t, "#")
}

// indentOf counts the leading spaces of line.
func indentOf(line string) int { return len(line) - len(strings.TrimLeft(line, " ")) }

// prevContent returns the number of the last line with content at or
// before line n (1-based), or 0.
func prevContent(lines []string, n int) int {
	for ; n > 0; n-- {
		if content(lines[n-1]) {
			return n
		}
	}
	return 0
}

// hasKeyColon reports whether line has a colon that ends a key: followed
// by a space or ending the line (a list item's dash left out).
func hasKeyColon(line string) bool {
	t := strings.TrimSpace(line)
	t = strings.TrimSpace(strings.TrimPrefix(t, "-"))
	if t == "" || t[0] == '[' || t[0] == '{' || t[0] == '"' || t[0] == '\'' {
		return true // a flow value or a quoted scalar: not a missing colon
	}
	return strings.Contains(t, ": ") || strings.HasSuffix(t, ":")
}

// shallowerThanFirst returns the first line with content, when it is
// indented, and the first line after it indented less; 0, 0 if none.
func shallowerThanFirst(lines []string) (first, line int) {
	for i, l := range lines {
		if !content(l) {
			continue
		}
		if first == 0 {
			if indentOf(l) == 0 {
				return 0, 0
			}
			first = i + 1
			continue
		}
		if indentOf(l) < indentOf(lines[first-1]) {
			return first, i + 1
		}
	}
	return 0, 0
}

// firstTabIndent returns the first line whose indentation has a tab, or
// 0.
func firstTabIndent(lines []string) int {
	for i, l := range lines {
		lead := l[:len(l)-len(strings.TrimLeft(l, " \t"))]
		if strings.Contains(lead, "\t") && content(l) {
			return i + 1
		}
	}
	return 0
}

// openBracket returns the line and the bracket of the flow collection
// left open (or closed by the wrong bracket), skipping quoted text and
// comments; 0 if every bracket is closed.
func openBracket(lines []string) (int, byte) {
	type open struct {
		b    byte
		line int
	}
	var stack []open
	for i, l := range lines {
		var quote byte
		for j := 0; j < len(l); j++ {
			c := l[j]
			switch {
			case quote != 0:
				if c == quote {
					quote = 0
				}
			case c == '"' || c == '\'':
				quote = c
			case c == '#' && (j == 0 || l[j-1] == ' '):
				j = len(l)
			case c == '[' || c == '{':
				stack = append(stack, open{c, i + 1})
			case c == ']' || c == '}':
				if len(stack) == 0 {
					continue
				}
				top := stack[len(stack)-1]
				if closing(top.b) != c {
					return top.line, top.b
				}
				stack = stack[:len(stack)-1]
			}
		}
	}
	if len(stack) > 0 {
		top := stack[len(stack)-1]
		return top.line, top.b
	}
	return 0, 0
}

// oddIndent returns the first line of block structure indented unlike
// the lines it follows: less than the line before it but more than the
// enclosing block (a sibling one space short), with its indentation and
// its neighbours'; 0 if none. Lines inside flow collections are skipped.
func oddIndent(lines []string) (line, n int, around string) {
	var levels []int
	depth := 0
	for i, l := range lines {
		startDepth := depth
		for j := 0; j < len(l); j++ { // flow depth at the end of the line, roughly
			switch l[j] {
			case '[', '{':
				depth++
			case ']', '}':
				depth = max(depth-1, 0)
			case '#':
				j = len(l)
			}
		}
		if !content(l) || startDepth > 0 {
			continue
		}
		in := indentOf(l)
		popped := false
		for len(levels) > 0 && levels[len(levels)-1] > in {
			levels = levels[:len(levels)-1]
			popped = true
		}
		if popped && (len(levels) == 0 || levels[len(levels)-1] < in) {
			prev := 0
			if len(levels) > 0 {
				prev = levels[len(levels)-1]
			}
			around := fmt.Sprint(prev)
			if next := indentOf(lines[prevContent(lines, i)-1]); next != prev {
				around = fmt.Sprintf("%d or %d", prev, next)
			}
			return i + 1, in, around
		}
		if len(levels) == 0 || levels[len(levels)-1] < in {
			levels = append(levels, in)
		}
		if t := strings.TrimLeft(l, " "); strings.HasPrefix(t, "- ") {
			levels = append(levels, in+2)
		}
	}
	return 0, 0, ""
}
