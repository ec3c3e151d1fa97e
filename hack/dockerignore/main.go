// Command dockerignore-check answers what `docker build` sends of a build context. It reads
// a .dockerignore with Docker's own reader (ignorefile.ReadAll) and applies it with Docker's
// own matcher (patternmatcher) the way BuildKit's context walk does (tonistiigi/fsutil's
// filter): each path is matched from the context root down with MatchesUsingParentResults,
// carrying its parent directory's results, and an excluded directory is skipped whole
// unless an exception (`!`) pattern could re-include something under it.
//
//	dockerignore-check -f FILE [PATH...]   one line per PATH: "sent<TAB>PATH" or
//	                                       "excluded<TAB>PATH"; with no PATH, one per line of stdin
//	dockerignore-check -f FILE -list DIR   every file (not directory) under DIR that Docker
//	                                       would send, relative to DIR, one per line
//
// A PATH is slash-separated and relative to the context root, as `git ls-files` prints it;
// one ending in "/" is a directory, any other a file. Exit status 2 on bad input.
package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/moby/patternmatcher"
	"github.com/moby/patternmatcher/ignorefile"
)

// verdict is what the context walk does with one path.
type verdict int

const (
	send           verdict = iota // sent to the build
	excludeDescend                // not sent, but its directory is walked: an exception may apply below
	excludeSkip                   // not sent, nor anything under it
)

// filter is a .dockerignore's patterns, applied as BuildKit applies them.
type filter struct {
	pm *patternmatcher.PatternMatcher
	// BuildKit skips an excluded directory only when no exception pattern holds a glob
	// (other than a trailing /* or /**); otherwise it walks every excluded directory.
	prefixOnlyExceptions bool
}

func newFilter(ignoreFile string) (*filter, error) {
	file, err := os.Open(ignoreFile)
	if err != nil {
		return nil, fmt.Errorf("the .dockerignore to apply (-f): %w", err)
	}
	defer file.Close()
	patterns, err := ignorefile.ReadAll(file)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", ignoreFile, err)
	}
	pm, err := patternmatcher.New(patterns)
	if err != nil {
		return nil, fmt.Errorf("%s holds a pattern Docker rejects: %w", ignoreFile, err)
	}
	f := &filter{pm: pm, prefixOnlyExceptions: true}
	for _, p := range pm.Patterns() {
		if p.Exclusion() && strings.ContainsAny(withoutTrailingGlob(p), `*[]?^\`) {
			f.prefixOnlyExceptions = false
		}
	}
	return f, nil
}

func withoutTrailingGlob(p *patternmatcher.Pattern) string {
	s := strings.TrimSuffix(p.String(), string(filepath.Separator)+"**")
	return strings.TrimSuffix(s, string(filepath.Separator)+"*")
}

// visit decides one path (relative to the context root) given its parent directory's
// match results, and returns its own for its children.
func (f *filter) visit(rel string, isDir bool, parent patternmatcher.MatchInfo) (verdict, patternmatcher.MatchInfo, error) {
	excluded, info, err := f.pm.MatchesUsingParentResults(rel, parent)
	if err != nil {
		return excludeSkip, info, fmt.Errorf("matching %s: %w", rel, err)
	}
	if !excluded {
		return send, info, nil
	}
	if !isDir || !f.prefixOnlyExceptions {
		return excludeDescend, info, nil
	}
	dirSlash := rel + string(filepath.Separator)
	for _, p := range f.pm.Patterns() {
		if p.Exclusion() && strings.HasPrefix(withoutTrailingGlob(p)+string(filepath.Separator), dirSlash) {
			return excludeDescend, info, nil
		}
	}
	return excludeSkip, info, nil
}

// sent reports whether Docker sends the file (or, ending in "/", the directory) at rel: the
// walk visits each of its parent directories first, as BuildKit's does.
func (f *filter) sent(rel string) (bool, error) {
	trimmed := strings.TrimSuffix(rel, "/")
	if trimmed == "" || path.Clean(trimmed) != trimmed || path.IsAbs(trimmed) ||
		trimmed == ".." || strings.HasPrefix(trimmed, "../") {
		return false, fmt.Errorf("%q is not a clean path relative to the context root (give it as `git ls-files` prints it)", rel)
	}
	parts := strings.Split(trimmed, "/")
	var info patternmatcher.MatchInfo
	for i := range parts {
		last := i == len(parts)-1
		var v verdict
		var err error
		v, info, err = f.visit(strings.Join(parts[:i+1], "/"), !last || strings.HasSuffix(rel, "/"), info)
		if err != nil {
			return false, err
		}
		if last {
			return v == send, nil
		}
		if v == excludeSkip {
			return false, nil
		}
	}
	return false, nil
}

// list writes every non-directory entry under root that Docker would send.
func (f *filter) list(root string, out io.Writer) error {
	type dir struct {
		withSep string
		info    patternmatcher.MatchInfo
	}
	var parents []dir
	return filepath.WalkDir(root, func(full string, entry fs.DirEntry, walkErr error) error {
		if walkErr != nil {
			return walkErr
		}
		rel, err := filepath.Rel(root, full)
		if err != nil || rel == "." {
			return err
		}
		if strings.ContainsAny(rel, "\n\r") {
			return fmt.Errorf("%q: a name with a line break cannot be listed one per line; rename it", rel)
		}
		for len(parents) > 0 && !strings.HasPrefix(rel, parents[len(parents)-1].withSep) {
			parents = parents[:len(parents)-1]
		}
		var parent patternmatcher.MatchInfo
		if len(parents) > 0 {
			parent = parents[len(parents)-1].info
		}
		v, info, err := f.visit(rel, entry.IsDir(), parent)
		if err != nil {
			return err
		}
		switch {
		case v == excludeSkip:
			return filepath.SkipDir
		case entry.IsDir():
			parents = append(parents, dir{withSep: rel + string(filepath.Separator), info: info})
		case v == send:
			_, err = fmt.Fprintln(out, filepath.ToSlash(rel))
		}
		return err
	})
}

func run(args []string, stdin io.Reader, stdout io.Writer) error {
	flags := flag.NewFlagSet("dockerignore-check", flag.ContinueOnError)
	ignoreFile := flags.String("f", "", "the .dockerignore to apply (required)")
	listDir := flags.String("list", "", "list every file under this context directory that Docker would send")
	if err := flags.Parse(args); err != nil {
		return err
	}
	if *ignoreFile == "" {
		return errors.New("-f FILE is required: the .dockerignore to apply")
	}
	f, err := newFilter(*ignoreFile)
	if err != nil {
		return err
	}
	out := bufio.NewWriter(stdout)
	defer out.Flush()
	if *listDir != "" {
		if flags.NArg() > 0 {
			return errors.New("-list takes no PATH arguments")
		}
		return f.list(*listDir, out)
	}
	answer := func(rel string) error {
		ok, err := f.sent(rel)
		if err != nil {
			return err
		}
		word := "excluded"
		if ok {
			word = "sent"
		}
		_, err = fmt.Fprintf(out, "%s\t%s\n", word, rel)
		return err
	}
	if flags.NArg() > 0 {
		for _, rel := range flags.Args() {
			if err := answer(rel); err != nil {
				return err
			}
		}
		return nil
	}
	lines := bufio.NewScanner(stdin)
	lines.Buffer(make([]byte, 64*1024), 1024*1024)
	for lines.Scan() {
		if lines.Text() == "" {
			continue
		}
		if err := answer(lines.Text()); err != nil {
			return err
		}
	}
	return lines.Err()
}

func main() {
	if err := run(os.Args[1:], os.Stdin, os.Stdout); err != nil {
		fmt.Fprintf(os.Stderr, "dockerignore-check: %v\n", err)
		os.Exit(2)
	}
}
