package main

// strata completion bash|zsh|fish: a completion script generated from the
// command registry. Commands and their aliases and actions come from the
// registry; each command's and action's flags from its own --help (the
// flag table clientCmd prints, or the flags its usage names), so that a
// flag added to a command is completed without more code.

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"regexp"
	"slices"
	"sort"
	"strings"
)

func init() {
	register(&command{
		name:    "completion",
		summary: "print a shell completion script: bash, zsh or fish",
		run:     runCompletion,
	})
}

const completionUsage = `Usage: strata completion bash|zsh|fish

Prints a completion script for the shell: the commands and their aliases,
each command's actions, and each command's and action's flags.

Install it (docs/cli.md):
  bash:  strata completion bash > /etc/bash_completion.d/strata
         (or: source <(strata completion bash) in ~/.bashrc)
  zsh:   strata completion zsh > "${fpath[1]}/_strata"
         (or: source <(strata completion zsh) in ~/.zshrc, after compinit)
  fish:  strata completion fish > ~/.config/fish/completions/strata.fish

Example:
  source <(strata completion bash)
`

var completionShells = map[string]func(w io.Writer, tree []compCommand){
	"bash": writeBashCompletion,
	"zsh":  writeZshCompletion,
	"fish": writeFishCompletion,
}

func runCompletion(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("strata completion", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	args, err := parseMixed(fs, args)
	if err != nil {
		if !reportFlagError(stderr, "completion", fs, err) {
			fmt.Fprint(stdout, completionUsage)
			return 0
		}
		fmt.Fprintln(stderr, "Run 'strata completion --help' for how to install the script.")
		return 2
	}
	if len(args) == 1 && args[0] == "help" {
		fmt.Fprint(stdout, completionUsage)
		return 0
	}
	if len(args) != 1 || completionShells[args[0]] == nil {
		got := "no shell"
		if len(args) > 0 {
			got = fmt.Sprintf("%q", strings.Join(args, " "))
		}
		fmt.Fprintf(stderr, "strata completion: want one shell, bash, zsh or fish, got %s%s\nRun 'strata completion --help' for how to install the script.\n", got, shellHint(args))
		return 2
	}
	var buf bytes.Buffer
	completionShells[args[0]](&buf, completionTree())
	if _, err := stdout.Write(buf.Bytes()); err != nil {
		fmt.Fprintf(stderr, "strata completion: %v\n", err)
		return 1
	}
	return 0
}

func shellHint(args []string) string {
	if len(args) == 1 && !strings.HasPrefix(args[0], "-") {
		return didYouMean(args[0], []string{"bash", "zsh", "fish"}, "")
	}
	return ""
}

// compCommand is one command of the completion tree.
type compCommand struct {
	name    string
	alias   string // "" for none
	summary string
	flags   []string // without dashes
	actions []compAction
}

type compAction struct {
	name  string
	flags []string
}

// helpFlag matches a flag as help texts write it: a flag table's line, or
// any --flag in the text of a command without a table.
var (
	helpTableFlag = regexp.MustCompile(`(?m)^ {2,}--?([a-z][a-z0-9.-]*[a-z0-9])\b`)
	helpTextFlag  = regexp.MustCompile(`(?:^|[\s\[(|])--([a-z][a-z0-9-]*[a-z0-9])\b`)
)

// helpFlags returns the flags the help of `strata args... --help` lists.
func helpFlags(args []string) []string {
	var out bytes.Buffer
	if dispatch(append(slices.Clone(args), "--help"), &out, io.Discard) != 0 {
		return nil
	}
	help := out.String()
	re := helpTableFlag
	if _, table, ok := strings.Cut(help, "\nFlags:\n"); ok {
		help = table
	} else {
		re = helpTextFlag
	}
	seen := map[string]bool{"help": true}
	var flags []string
	for _, m := range re.FindAllStringSubmatch(help, -1) {
		if !seen[m[1]] {
			seen[m[1]] = true
			flags = append(flags, m[1])
		}
	}
	sort.Strings(flags)
	return append(flags, "help")
}

// completionTree is the registry as the completion scripts need it.
func completionTree() []compCommand {
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	var tree []compCommand
	for _, n := range names {
		c := commands[n]
		cc := compCommand{name: n, alias: aliasOf(n), summary: c.summary}
		acts := slices.Collect(func(yield func(string) bool) {
			for a := range c.actions {
				if !yield(a) {
					return
				}
			}
		})
		acts = append(acts, c.actionNames...)
		sort.Strings(acts)
		if n != "completion" && (c.run != nil && c.actionNames == nil || len(acts) == 0) {
			cc.flags = helpFlags([]string{n})
		}
		for _, a := range acts {
			cc.actions = append(cc.actions, compAction{name: a, flags: helpFlags([]string{n, a})})
		}
		if n == "completion" {
			for _, sh := range slices.Sorted(func(yield func(string) bool) {
				for s := range completionShells {
					if !yield(s) {
						return
					}
				}
			}) {
				cc.actions = append(cc.actions, compAction{name: sh})
			}
		}
		tree = append(tree, cc)
	}
	return tree
}

func dashed(flags []string) string {
	out := make([]string, len(flags))
	for i, f := range flags {
		out[i] = "--" + f
	}
	return strings.Join(out, " ")
}

func (c compCommand) names() string {
	if c.alias != "" {
		return c.name + "|" + c.alias
	}
	return c.name
}

func (c compCommand) actionNames() string {
	var a []string
	for _, x := range c.actions {
		a = append(a, x.name)
	}
	return strings.Join(a, " ")
}

func topLevelWords(tree []compCommand) string {
	var w []string
	for _, c := range tree {
		w = append(w, c.name)
		if c.alias != "" {
			w = append(w, c.alias)
		}
	}
	return strings.Join(append(w, "help", "--help", "--version"), " ")
}

// writeCompletionCases writes the shell's case statement over command and
// action; reply(words) is the shell's way to offer words, files() to
// offer file names.
func writeCompletionCases(w io.Writer, tree []compCommand, indent string, reply func(string) string, files string) {
	fmt.Fprintf(w, "%scase \"$cmd\" in\n", indent)
	fmt.Fprintf(w, "%s'') %s ;;\n", indent, reply(topLevelWords(tree)))
	for _, c := range tree {
		fmt.Fprintf(w, "%s%s)\n", indent, c.names())
		if len(c.actions) == 0 {
			fmt.Fprintf(w, "%s  if [[ $cur == -* ]]; then %s; else %s; fi ;;\n", indent, reply(dashed(c.flags)), files)
			continue
		}
		fmt.Fprintf(w, "%s  case \"$act\" in\n", indent)
		for _, a := range c.actions {
			if len(a.flags) == 0 {
				fmt.Fprintf(w, "%s  %s) ;;\n", indent, a.name)
				continue
			}
			fmt.Fprintf(w, "%s  %s) if [[ $cur == -* ]]; then %s; else %s; fi ;;\n", indent, a.name, reply(dashed(a.flags)), files)
		}
		own := c.actionNames()
		if len(c.flags) > 0 {
			fmt.Fprintf(w, "%s  '') if [[ $cur == -* ]]; then %s; else %s; fi ;;\n", indent, reply(dashed(c.flags)), reply(own))
		} else {
			fmt.Fprintf(w, "%s  '') %s ;;\n", indent, reply(own+" --help"))
		}
		fmt.Fprintf(w, "%s  esac ;;\n", indent)
	}
	fmt.Fprintf(w, "%sesac\n", indent)
}

// The first two words that are not flags are the command and the action;
// a word after a flag that takes a value may be taken for one, which only
// makes the offer less precise.
func writeBashCompletion(w io.Writer, tree []compCommand) {
	fmt.Fprint(w, `# bash completion for strata, generated by 'strata completion bash'.
_strata() {
  local cur="${COMP_WORDS[COMP_CWORD]}" cmd="" act="" i word
  for ((i = 1; i < COMP_CWORD; i++)); do
    word="${COMP_WORDS[i]}"
    [[ $word == -* ]] && continue
    if [[ -z $cmd ]]; then cmd=$word; elif [[ -z $act ]]; then act=$word; break; fi
  done
  COMPREPLY=()
`)
	writeCompletionCases(w, tree, "  ", func(words string) string {
		return fmt.Sprintf(`COMPREPLY=($(compgen -W %q -- "$cur"))`, words)
	}, `COMPREPLY=($(compgen -f -- "$cur"))`)
	fmt.Fprint(w, "}\ncomplete -o default -F _strata strata\n")
}

func writeZshCompletion(w io.Writer, tree []compCommand) {
	fmt.Fprint(w, `#compdef strata
# zsh completion for strata, generated by 'strata completion zsh'.
_strata() {
  local cur="${words[CURRENT]}" cmd="" act="" i word
  for ((i = 2; i < CURRENT; i++)); do
    word="${words[i]}"
    [[ $word == -* ]] && continue
    if [[ -z $cmd ]]; then cmd=$word; elif [[ -z $act ]]; then act=$word; break; fi
  done
`)
	writeCompletionCases(w, tree, "  ", func(words string) string {
		return fmt.Sprintf("compadd -- %s", words)
	}, "_files")
	fmt.Fprint(w, `}
if [[ ${zsh_eval_context[-1]} == loadautofunc ]]; then
  _strata "$@"
else
  compdef _strata strata
fi
`)
}

func fishQuote(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s) + "'"
}

func writeFishCompletion(w io.Writer, tree []compCommand) {
	fmt.Fprint(w, "# fish completion for strata, generated by 'strata completion fish'.\ncomplete -c strata -f\n")
	fmt.Fprint(w, "complete -c strata -n __fish_use_subcommand -l help -d 'show the commands'\n")
	fmt.Fprint(w, "complete -c strata -n __fish_use_subcommand -l version -d 'print the version'\n")
	for _, c := range tree {
		names := c.name
		if c.alias != "" {
			names += " " + c.alias
		}
		fmt.Fprintf(w, "complete -c strata -n __fish_use_subcommand -a %s -d %s\n", fishQuote(names), fishQuote(c.summary))
		seen := "__fish_seen_subcommand_from " + names
		for _, f := range c.flags {
			fmt.Fprintf(w, "complete -c strata -F -n %s -l %s\n", fishQuote(seen), f)
		}
		if len(c.actions) == 0 {
			continue
		}
		acts := c.actionNames()
		fmt.Fprintf(w, "complete -c strata -n %s -a %s\n", fishQuote(seen+"; and not __fish_seen_subcommand_from "+acts), fishQuote(acts))
		for _, a := range c.actions {
			for _, f := range a.flags {
				fmt.Fprintf(w, "complete -c strata -F -n %s -l %s\n", fishQuote(seen+"; and __fish_seen_subcommand_from "+a.name), f)
			}
		}
	}
}
