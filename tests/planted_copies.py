"""Copies of a module disguised as a learner who copies would disguise them: names renamed,
top-level definitions reordered, comments added. Each keeps the module's behaviour (it still
imports and runs the same), so only a similarity report can find it."""
import ast
import io
import keyword
import tokenize


def renamed(source: str) -> str:
    """Every argument and local variable of every function renamed (`x` -> `x_value`)."""
    tree = ast.parse(source)
    local = set()
    for function in (n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)):
        local |= {a.arg for a in [*function.args.args, *function.args.kwonlyargs, *function.args.posonlyargs]}
        local |= {n.id for n in ast.walk(function) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    keywords_passed = {k.arg for k in ast.walk(tree) if isinstance(k, ast.keyword) and k.arg}
    local -= keywords_passed | set(keyword.kwlist) | {"self"}
    tokens = []
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.NAME and token.string in local:
            token = token._replace(string=f"{token.string}_value")
        tokens.append(token)
    return tokenize.untokenize(tokens)


def reordered(source: str) -> str:
    """The imports first, then the other top-level statements in reverse order."""
    lines = source.splitlines(keepends=True)
    tree = ast.parse(source)
    pieces = []
    for node in tree.body:
        start = min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", []))])
        pieces.append((isinstance(node, (ast.Import, ast.ImportFrom)) or _is_docstring(node),
                       "".join(lines[start - 1:node.end_lineno])))
    head = [text for first, text in pieces if first]
    rest = [text for first, text in pieces if not first]
    return "\n\n".join([*head, *reversed(rest)]) + "\n"


def commented(source: str) -> str:
    """A comment line before every statement."""
    starts = {node.lineno for node in ast.walk(ast.parse(source)) if isinstance(node, ast.stmt)}
    out = []
    for number, line in enumerate(source.splitlines(), start=1):
        if number in starts:
            indent = line[:len(line) - len(line.lstrip())]
            out.append(f"{indent}# step: {line.strip()[:20].replace('#', '')}")
        out.append(line)
    return "\n".join(out) + "\n"


def disguised(source: str) -> str:
    return commented(reordered(renamed(source)))


def _is_docstring(node) -> bool:
    return isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)
