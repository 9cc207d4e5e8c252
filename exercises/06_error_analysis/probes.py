"""Probes of the visible and graded tests. Each calls your function of the same name beside your
module (in the worker during official grading), `probe(module, keep, *args, **kwargs)`, and brings
back what it returned as data: a table as its column names and its rows (only the columns named
in `keep`). README.md, section "What your functions return", says how each kind
of value is read; `table_rows` and `one_row` are the tests' side of the same reading."""
TABLE = "table returned"          # the key that marks a table read by `as_data`


def load_results(module, keep, *args, **kwargs):
    return _read(module.load_results, keep, args, kwargs)


def paired(module, keep, *args, **kwargs):
    return _read(module.paired, keep, args, kwargs)


def lost_and_gained(module, keep, *args, **kwargs):
    return _read(module.lost_and_gained, keep, args, kwargs)


def accuracy_by(module, keep, *args, **kwargs):
    return _read(module.accuracy_by, keep, args, kwargs)


def overall(module, keep, *args, **kwargs):
    return _read(module.overall, keep, args, kwargs)


def accuracy_by_length(module, keep, *args, **kwargs):
    return _read(module.accuracy_by_length, keep, args, kwargs)


def largest_drop(module, keep, *args, **kwargs):
    return _read(module.largest_drop, keep, args, kwargs)


def paired_bootstrap(module, keep, *args, **kwargs):
    return _read(module.paired_bootstrap, keep, args, kwargs)


def _read(function, keep, args, kwargs):
    """`function(*args, **kwargs)` as data; of its tables, rows and dicts, the names in `keep`."""
    return as_data(function(*args, **kwargs), list(keep))


def as_data(value, keep):
    """A returned value as plain data: tables as {TABLE: {"columns", "rows"}}, a Series as a row
    (labelled by column names) or a list (labelled by positions), arrays as lists, NumPy values
    as Python ones; of tables, rows and dicts only the names in `keep`."""
    library = type(value).__module__.split(".")[0]
    if library == "pandas" and hasattr(value, "columns"):
        return {TABLE: _pandas_table(value, keep)}
    if library == "polars" and hasattr(value, "columns"):
        columns = [str(c) for c in value.columns]
        rows = value.select([c for c in value.columns if c in keep]).to_dicts()
        return {TABLE: {"columns": columns, "rows": [_plain_row(row) for row in rows]}}
    if library == "pandas" and hasattr(value, "index") and hasattr(value, "items"):      # a Series
        labels = list(value.index)
        if labels and all(isinstance(label, str) for label in labels):
            return {label: _plain(item) for label, item in value.items() if label in keep}
        return [_plain(item) for item in value.tolist()]
    if library in ("pandas", "polars", "numpy") and hasattr(value, "tolist" if library != "polars" else "to_list"):
        items = value.tolist() if library != "polars" else value.to_list()   # an Index, a polars Series, an array
        return [_plain(item) for item in items] if isinstance(items, list) else _plain(items)
    if isinstance(value, dict):
        return {str(k): as_data(v, keep) for k, v in value.items() if str(k) in keep}
    if isinstance(value, (list, tuple)):
        return [as_data(v, keep) for v in value]
    return _plain(value)


def _pandas_table(frame, keep):
    if any(name is not None for name in frame.index.names):
        frame = frame.reset_index()        # groupby's keys, left in the index, become columns
    columns = [c if isinstance(c, str) else repr(c) for c in frame.columns]
    wanted = [c for c in frame.columns if isinstance(c, str) and c in keep]
    rows = frame.loc[:, wanted].to_dict("records") if wanted else [{} for _ in range(len(frame))]
    return {"columns": columns, "rows": [_plain_row(row) for row in rows]}


def _plain_row(row):
    return {str(k): _plain(v) for k, v in row.items()}


def _plain(value):
    if type(value).__name__ in ("NAType", "NaTType"):      # pandas' missing values
        return None
    if type(value).__module__ == "numpy" and hasattr(value, "item"):
        return value.item()
    return value


# ---------------------------------------------------------------- the tests' side

def table_rows(value, what, columns):
    """The rows of a table a function returned (or of a list of row dicts), each with the named
    columns; an AssertionError says what is missing."""
    __tracebackhide__ = True
    if isinstance(value, dict) and TABLE in value:
        found, rows = value[TABLE]["columns"], value[TABLE]["rows"]
    elif isinstance(value, list) and all(isinstance(row, dict) for row in value):
        found, rows = sorted({k for row in value for k in row}), value
    else:
        raise AssertionError(f"{what} returned {_kind(value)}, expected a table (a DataFrame, or a list of row dicts)")
    missing = [c for c in columns if c not in found]
    if missing and (rows or found):
        raise AssertionError(f"{what} returned a table without the column(s) {missing}; its columns: {found} "
                             "(name every column as README.md says; keys left in the index count as columns)")
    return rows


def one_row(value, what, columns):
    """A single row a function returned: a dict, a Series or a table of one row."""
    __tracebackhide__ = True
    if isinstance(value, dict) and TABLE in value or isinstance(value, list):
        rows = table_rows(value, what, columns)
        assert len(rows) == 1, f"{what} returned a table of {len(rows)} rows, expected one row (or None)"
        return rows[0]
    if not isinstance(value, dict):
        raise AssertionError(f"{what} returned {_kind(value)}, expected one row: a dict, a Series or a one-row table")
    missing = [c for c in columns if c not in value]
    assert not missing, f"{what} returned a row without {missing}; it has {sorted(value)}"
    return value


def _kind(value):
    return "None" if value is None else f"a {type(value).__name__}"
