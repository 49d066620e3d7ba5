// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

// Command walk follows a value through the code the way a reader does: from
// a function, into every call the value is passed to, and from there into
// every call the callee passes it on to, and prints each stop and a summary.
// It counts what docs/adr/0028-one-sync-one-story.md reports for the task
// controller: `go run ./hack/walk` walks the task parameter of
// TaskController.reconcile.
//
// The rules, so that two counts agree:
//   - A stop is a call, in a function being walked, with the followed
//     variable itself as an argument (task, &task, *task, (task)); a field
//     of it, a method called on it, or a struct literal holding it is not
//     a pass.
//   - Only calls whose callee is a function or a method of this module,
//     resolved statically, or a function literal the walked function
//     assigned to a local variable, are stops; calls through interfaces or
//     other function values cannot be followed by reading, and the
//     module's code ends at its packages.
//   - Each call site is a stop. A callee's body is walked the first time
//     it is reached, following the parameter that received the value,
//     unless the callee is in a leaf package: pkg/builders by default.
//     A builder is a pure function with a contract and a table of tests;
//     the reader of a sync reads its name and its doc comment, not how it
//     is made.
//   - A stop returns to a file already left when its callee is in another
//     file than its caller and that file was visited before.
package main

import (
	"flag"
	"fmt"
	"go/ast"
	"go/token"
	"go/types"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/tools/go/packages"
)

func main() {
	pkgPattern := flag.String("packages", "./pkg/...", "packages the walk may enter")
	start := flag.String("from", "(*github.com/caliban-ai/caliban-operator/pkg/operator.TaskController).reconcile", "function to start from")
	param := flag.String("param", "task", "parameter of the start function to follow")
	quiet := flag.Bool("q", false, "print the summary only")
	perCaller := flag.Bool("once-per-caller", false, "count a callee once per caller, however many calls it has there")
	leaves := flag.String("leaves", "github.com/caliban-ai/caliban-operator/pkg/builders", "comma-separated packages whose functions are stops but are not walked into")
	flag.Parse()
	w, err := Walk(*pkgPattern, *start, *param, strings.Split(*leaves, ","), *perCaller)
	if err != nil {
		fmt.Fprintln(os.Stderr, "walk:", err)
		os.Exit(1)
	}
	if !*quiet {
		for i, s := range w.Stops {
			mark := ""
			if s.Return {
				mark = "  (back to a file already left)"
			}
			fmt.Printf("%2d. %s%s -> %s [%s]%s\n", i+1, strings.Repeat("  ", s.Depth), s.Caller, s.Callee, s.File, mark)
		}
	}
	fmt.Printf("%d stops in %d files, %d of them back to a file already left\n", len(w.Stops), w.Files, w.Returns)
}

// Stop is one call followed.
type Stop struct {
	Caller, Callee string
	// File is the callee's file, relative to the module root.
	File   string
	Depth  int
	Return bool
}

// Result is a walk's stops and its summary.
type Result struct {
	Stops   []Stop
	Files   int
	Returns int
}

type walker struct {
	fset    *token.FileSet
	decls   map[*types.Func]*ast.FuncDecl
	infos   map[*ast.FuncDecl]*types.Info
	walked  map[*types.Func]bool
	visited map[string]bool
	leaves  map[string]bool
	root    string
	// oncePerCaller counts a callee once per caller.
	oncePerCaller bool
	res           Result
}

// Walk loads pattern and walks param of the function named from (as
// types.Func.FullName prints it).
func Walk(pattern, from, param string, leaves []string, oncePerCaller bool) (*Result, error) {
	cfg := &packages.Config{Mode: packages.NeedName | packages.NeedFiles | packages.NeedSyntax | packages.NeedTypes | packages.NeedTypesInfo | packages.NeedModule}
	pkgs, err := packages.Load(cfg, pattern)
	if err != nil {
		return nil, err
	}
	w := &walker{decls: map[*types.Func]*ast.FuncDecl{}, infos: map[*ast.FuncDecl]*types.Info{}, walked: map[*types.Func]bool{}, visited: map[string]bool{},
		leaves: map[string]bool{}, oncePerCaller: oncePerCaller}
	for _, l := range leaves {
		if l != "" {
			w.leaves[l] = true
		}
	}
	var startFn *types.Func
	for _, p := range pkgs {
		if len(p.Errors) > 0 {
			return nil, fmt.Errorf("%s: %v", p.PkgPath, p.Errors[0])
		}
		if p.Module != nil && w.root == "" {
			w.root = p.Module.Dir
		}
		w.fset = p.Fset
		for _, f := range p.Syntax {
			for _, d := range f.Decls {
				fd, ok := d.(*ast.FuncDecl)
				if !ok {
					continue
				}
				fn, _ := p.TypesInfo.Defs[fd.Name].(*types.Func)
				if fn == nil {
					continue
				}
				w.decls[fn], w.infos[fd] = fd, p.TypesInfo
				if fn.FullName() == from {
					startFn = fn
				}
			}
		}
	}
	if startFn == nil {
		return nil, fmt.Errorf("no function %s in %s", from, pattern)
	}
	decl := w.decls[startFn]
	v := paramNamed(w.infos[decl], decl, param)
	if v == nil {
		return nil, fmt.Errorf("%s has no parameter %s", from, param)
	}
	w.visited[w.file(decl)] = true
	w.walk(startFn, v, 0)
	w.res.Files = len(w.visited)
	return &w.res, nil
}

func (w *walker) file(n ast.Node) string {
	name := w.fset.Position(n.Pos()).Filename
	if rel, err := filepath.Rel(w.root, name); err == nil {
		return rel
	}
	return name
}

func paramNamed(info *types.Info, fd *ast.FuncDecl, name string) *types.Var {
	for _, field := range fd.Type.Params.List {
		for _, n := range field.Names {
			if n.Name == name {
				v, _ := info.Defs[n].(*types.Var)
				return v
			}
		}
	}
	return nil
}

// walk follows v through fn's body.
func (w *walker) walk(fn *types.Func, v *types.Var, depth int) {
	w.walked[fn] = true
	decl := w.decls[fn]
	w.walkBody(fn.Name(), decl.Body, w.infos[decl], w.file(decl), localFuncs(w.infos[decl], decl.Body), v, depth, map[*ast.FuncLit]bool{})
}

// localFuncs are the function literals body assigns to local variables.
func localFuncs(info *types.Info, body *ast.BlockStmt) map[*types.Var]*ast.FuncLit {
	out := map[*types.Var]*ast.FuncLit{}
	ast.Inspect(body, func(n ast.Node) bool {
		as, ok := n.(*ast.AssignStmt)
		if !ok || len(as.Lhs) != len(as.Rhs) {
			return true
		}
		for i, rhs := range as.Rhs {
			lit, ok := rhs.(*ast.FuncLit)
			id, isID := as.Lhs[i].(*ast.Ident)
			if !ok || !isID {
				continue
			}
			if v, ok := info.Defs[id].(*types.Var); ok {
				out[v] = lit
			} else if v, ok := info.Uses[id].(*types.Var); ok {
				out[v] = lit
			}
		}
		return true
	})
	return out
}

// walkBody follows v through body, a function's or a local function
// literal's, in file from.
func (w *walker) walkBody(caller string, body *ast.BlockStmt, info *types.Info, from string, locals map[*types.Var]*ast.FuncLit, v *types.Var, depth int, litWalked map[*ast.FuncLit]bool) {
	seen := map[any]bool{}
	ast.Inspect(body, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok {
			return true
		}
		if id, ok := ast.Unparen(call.Fun).(*ast.Ident); ok {
			if fv, ok := info.Uses[id].(*types.Var); ok && locals[fv] != nil {
				lit := locals[fv]
				for i, arg := range call.Args {
					if !isVar(info, arg, v) {
						continue
					}
					if w.oncePerCaller && seen[lit] {
						break
					}
					seen[lit] = true
					w.res.Stops = append(w.res.Stops, Stop{Caller: caller, Callee: id.Name + " (local func)", File: from, Depth: depth})
					if !litWalked[lit] {
						litWalked[lit] = true
						if p := litParamAt(info, lit, i); p != nil {
							w.walkBody(id.Name, lit.Body, info, from, locals, p, depth+1, litWalked)
						}
					}
					break
				}
				return true
			}
		}
		callee := calleeOf(info, call)
		if callee == nil || w.decls[callee] == nil {
			return true
		}
		for i, arg := range call.Args {
			if !isVar(info, arg, v) {
				continue
			}
			if w.oncePerCaller && seen[callee] {
				break
			}
			seen[callee] = true
			cdecl := w.decls[callee]
			to := w.file(cdecl)
			back := to != from && w.visited[to]
			w.visited[to] = true
			w.res.Stops = append(w.res.Stops, Stop{Caller: caller, Callee: callee.FullName(), File: to, Depth: depth, Return: back})
			if back {
				w.res.Returns++
			}
			if !w.walked[callee] && !w.leaves[callee.Pkg().Path()] {
				if p := paramAt(w.infos[cdecl], cdecl, i); p != nil {
					w.walk(callee, p, depth+1)
				}
			}
			break
		}
		return true
	})
}

func calleeOf(info *types.Info, call *ast.CallExpr) *types.Func {
	fun := ast.Unparen(call.Fun)
	if ix, ok := fun.(*ast.IndexExpr); ok { // a generic function instantiated
		fun = ix.X
	}
	if ix, ok := fun.(*ast.IndexListExpr); ok {
		fun = ix.X
	}
	switch f := fun.(type) {
	case *ast.Ident:
		fn, _ := info.Uses[f].(*types.Func)
		return origin(fn)
	case *ast.SelectorExpr:
		if sel := info.Selections[f]; sel != nil {
			if sel.Kind() != types.MethodVal {
				return nil
			}
			fn, _ := sel.Obj().(*types.Func)
			if fn == nil || types.IsInterface(sel.Recv()) {
				return nil
			}
			return origin(fn)
		}
		fn, _ := info.Uses[f.Sel].(*types.Func) // pkg.Func
		return origin(fn)
	}
	return nil
}

func origin(fn *types.Func) *types.Func {
	if fn == nil {
		return nil
	}
	return fn.Origin()
}

func isVar(info *types.Info, e ast.Expr, v *types.Var) bool {
	e = ast.Unparen(e)
	switch x := e.(type) {
	case *ast.UnaryExpr:
		if x.Op == token.AND {
			return isVar(info, x.X, v)
		}
	case *ast.StarExpr:
		return isVar(info, x.X, v)
	case *ast.Ident:
		return info.Uses[x] == v
	}
	return false
}

// litParamAt is paramAt for a function literal.
func litParamAt(info *types.Info, lit *ast.FuncLit, i int) *types.Var {
	return paramAt(info, &ast.FuncDecl{Type: lit.Type}, i)
}

// paramAt is the parameter that receives argument i (the variadic one for
// the arguments past the last).
func paramAt(info *types.Info, fd *ast.FuncDecl, i int) *types.Var {
	var names []*ast.Ident
	for _, field := range fd.Type.Params.List {
		if len(field.Names) == 0 {
			names = append(names, nil)
		}
		names = append(names, field.Names...)
	}
	if len(names) == 0 {
		return nil
	}
	if i >= len(names) {
		i = len(names) - 1
	}
	if names[i] == nil || names[i].Name == "_" {
		return nil
	}
	v, _ := info.Defs[names[i]].(*types.Var)
	return v
}
