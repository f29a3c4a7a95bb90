# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
r"""Every Jinja string literal in the collection is a valid escape sequence as Ansible hands it to Jinja, and the
patterns that guard names and paths still accept and refuse what they did.

Jinja decodes a string literal as Python does: '\Z' is an invalid escape sequence, which Python 3.12 warns about
(Jinja raises TemplateSyntaxError with -W error) and a later Python will refuse. Which backslashes Jinja sees depends
on how Ansible renders the text:

- a conditional (when, that, changed_when, failed_when, until) is a Jinja expression as written, so a regex
  backslash there is written twice: '^[a-z]+\\Z';
- a template file (the template action and lookup) is Jinja as written, likewise;
- in a {{ }} of any other YAML value Ansible doubles the backslashes of string literals first ('\1' there is the
  regex group \1), but not in a {% %} of the same value.

Each under its YAML quoting: in a plain, single-quoted or block YAML scalar a backslash is itself; in a
double-quoted one \\ is one backslash.
"""

from __future__ import absolute_import, division, print_function

import os
import re
import warnings

import jinja2
import jinja2.nodes
import pytest
import yaml

from .conftest import role_yaml, trust_as_template

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..', '..'))
# Where the collection's YAML and templates are; files/ directories are copied as they are, never templated.
TOP_DIRS = ('roles', 'playbooks', 'extensions', 'examples')
SKIP_DIRS = ('files', '__pycache__')
CONDITIONAL_KEYS = ('when', 'that', 'changed_when', 'failed_when', 'until')
YAML_STR = 'tag:yaml.org,2002:str'
# What the valid escapes '\1'..'\7' and '\b' decode to: never a regex group or word boundary.
SURPRISES = re.compile('[\x01-\x08]')


def collection_files(suffixes):
    for top in TOP_DIRS:
        for root, dirs, files in os.walk(os.path.join(REPO, top)):
            dirs[:] = sorted(name for name in dirs if name not in SKIP_DIRS and not name.startswith('.'))
            for name in sorted(files):
                if name.endswith(suffixes):
                    yield os.path.join(root, name)


def env(**options):
    return jinja2.Environment(extensions=['jinja2.ext.do', 'jinja2.ext.loopcontrols'], **options)


def ansible_escaped(source):
    """SOURCE as Ansible hands a templated YAML value to Jinja: backslashes in the string literals of its ``{{ }}``
    doubled (ansible-core's _escape_backslashes before 2.19, its AnsibleLexer since); ``{% %}`` left alone."""
    environment = env()
    parts, in_variable = [], False
    for dummy, token, value in environment.lexer.tokeniter(environment.preprocess(source), None):
        if token == 'variable_begin':
            in_variable = True
        elif token == 'variable_end':
            in_variable = False
        elif in_variable and token == 'string':
            value = value.replace('\\', '\\\\')
        parts.append(value)
    return ''.join(parts)


def jinja_source(text, conditional):
    """The Jinja template that Ansible parses for a YAML string value, or None when the value is not Jinja."""
    if conditional and '{{' not in text and '{%' not in text:
        return '{{ %s }}' % text  # a bare expression, its backslashes Jinja's own
    if '{{' in text or '{%' in text:
        return ansible_escaped(text)
    return None


def yaml_expressions(path):
    """(where, Jinja source, text, {}) for every templated string of the YAML file PATH; where: its line and task."""
    with open(path) as handle:
        documents = list(yaml.compose_all(handle))
    found = []

    def walk(node, task, conditional):
        if isinstance(node, yaml.MappingNode):
            names = [value.value for key, value in node.value
                     if isinstance(key, yaml.ScalarNode) and key.value == 'name' and isinstance(value, yaml.ScalarNode)]
            task = names[0] if names else task
            for key, value in node.value:
                walk(value, task, isinstance(key, yaml.ScalarNode) and key.value in CONDITIONAL_KEYS)
        elif isinstance(node, yaml.SequenceNode):
            for item in node.value:
                walk(item, task, conditional)
        elif isinstance(node, yaml.ScalarNode) and node.tag == YAML_STR:  # not !unsafe, not numbers or booleans
            source = jinja_source(node.value, conditional)
            if source is not None:
                where = 'line %d' % (node.start_mark.line + 1) + (' (%s)' % task if task else '')
                found.append((where, source, node.value, {}))

    for document in documents:
        walk(document, None, False)
    return found


def template_delimiters():
    """{template path: Environment options} for the template tasks that set their own delimiters, such as the alert
    pack's [[ ]] (its annotations are Prometheus templates); a {{ var }} option is read from the role's variables."""
    found = {}
    for path in collection_files(('.yml', '.yaml')):
        relpath = os.path.relpath(path, REPO).split(os.sep)
        if relpath[0] != 'roles' or len(relpath) < 4 or relpath[2] != 'tasks':
            continue
        with open(path) as handle:
            tasks = yaml.safe_load(handle) or []
        role_vars = {}
        for name in ('defaults/main.yml', 'vars/main.yml'):
            role_file = os.path.join(REPO, 'roles', relpath[1], name)
            if os.path.exists(role_file):
                with open(role_file) as handle:
                    role_vars.update(yaml.safe_load(handle) or {})
        stack = list(tasks)
        while stack:
            task = stack.pop()
            if not isinstance(task, dict):
                continue
            stack.extend(task.get('block', []) + task.get('rescue', []) + task.get('always', []))
            args = task.get('ansible.builtin.template', task.get('template'))
            if not isinstance(args, dict) or not any(key.endswith('_string') for key in args):
                continue
            options = {}
            for key, value in args.items():
                if key.endswith(('_start_string', '_end_string')):
                    match = re.match(r'^{{ *([A-Za-z_][A-Za-z0-9_]*) *}}$', value)
                    options[key] = role_vars[match.group(1)] if match else value
            found[os.path.join(REPO, 'roles', relpath[1], 'templates', args['src'])] = options
    return found


def template_expressions(path, delimiters=None):
    with open(path) as handle:
        text = handle.read()
    return [('template', text, text, (delimiters or {}).get(path, {}))]


def all_expressions():
    """(file, where, Jinja source, text as written, Environment options) for every Jinja text in the collection."""
    for path in collection_files(('.yml', '.yaml')):
        for where, source, text, options in yaml_expressions(path):
            yield os.path.relpath(path, REPO), where, source, text, options
    delimiters = template_delimiters()
    for path in collection_files(('.j2',)):
        for where, source, text, options in template_expressions(path, delimiters):
            yield os.path.relpath(path, REPO), where, source, text, options


def parse(source, strict=True, **options):
    """SOURCE's Jinja syntax tree, with warnings raised as errors (or, not STRICT, ignored)."""
    with warnings.catch_warnings():
        warnings.simplefilter('error' if strict else 'ignore')
        return env(**options).parse(source)


def parse_problem(source, **options):
    """Why Jinja refuses SOURCE with warnings as errors, or why one of its string literals is not what it seems."""
    try:
        tree = parse(source, **options)
    except Exception as error:  # TemplateSyntaxError, or a warning raised as one
        return '%s: %s' % (type(error).__name__, error)
    for node in tree.find_all(jinja2.nodes.Const):
        if isinstance(node.value, str) and SURPRISES.search(node.value):
            return r"the string %r holds a control character: a regex group or word boundary is '\\1', '\\b'" % (
                node.value)
    return None


@pytest.fixture(scope='module')
def expressions():
    return list(all_expressions())


def test_the_walk_finds_conditionals_statements_and_templates(expressions):
    files = set(found[0] for found in expressions)
    assert 'roles/gpu_services/tasks/preflight.yml' in files
    assert 'roles/gpu_services/templates/gpufleet-svc.service.j2' in files
    assert 'playbooks/templates/topology_report.j2' in files
    assert len(expressions) > 500
    # The alert pack is Jinja between [[ ]]: its {{ }} are Prometheus's.
    pack = template_delimiters()[os.path.join(REPO, 'roles/monitoring/templates/gpu_alerts.rules.yml.j2')]
    assert pack == {'variable_start_string': '[[', 'variable_end_string': ']]'}


@pytest.mark.parametrize('source', [
    "{{ 'a' is match('^a\\Z') }}",                    # a conditional's '\Z', as Jinja reads it
    "{% if x is match('^a\\Z') %}{% endif %}",         # a statement's, Ansible leaves it to Jinja
    "{{ '\\d' }}",
    "{% set x = y | regex_replace('^(a)b', '\\1') %}",  # valid, but chr(1), not the group
    "{{ x is search('\\bword') }}",                      # valid, but a backspace, not a word boundary
])
def test_the_check_refuses_an_invalid_or_surprising_escape(source):
    assert parse_problem(source) is not None


def test_ansible_doubles_the_backslashes_of_an_expression_but_not_of_a_statement():
    text = "{{ x | regex_replace('\\.', '\\1') }}{% if y is match('\\Z') %}{% endif %}"
    assert ansible_escaped(text) == "{{ x | regex_replace('\\\\.', '\\\\1') }}{% if y is match('\\Z') %}{% endif %}"
    assert parse_problem(jinja_source(text, False)) is not None
    assert parse_problem(jinja_source("{{ x | regex_replace('\\.', '\\1') }}", False)) is None
    assert parse_problem(jinja_source("x is match('^a\\Z')", True)) is not None


def test_every_jinja_string_literal_is_a_valid_escape(expressions):
    problems = []
    for path, where, source, text, options in expressions:
        problem = parse_problem(source, **options)
        if problem:
            problems.append('%s:%s: %s\n    %s' % (path, where, problem, text.strip().replace('\n', '\n    ')))
    assert not problems, '%d Jinja expressions Jinja refuses or warns about:\n%s' % (len(problems), '\n'.join(problems))


# What the patterns mean. Each is read from the file as Ansible hands it to Jinja, and Jinja decodes it (an invalid
# escape, which the test above refuses, is left as it was: these check the meaning alone); the match and search tests
# are Python's re.match and re.search. A guard matches the whole value: a trailing line break fails.

def file_patterns(relpath, test, variable):
    """The patterns of RELPATH's `VARIABLE is [not] TEST(pattern)` expressions, as Jinja decodes them."""
    path = os.path.join(REPO, relpath)
    found = []
    texts = template_expressions(path) if path.endswith('.j2') else yaml_expressions(path)
    for dummy, source, dummy_where, options in texts:
        for node in parse(source, False, **options).find_all(jinja2.nodes.Test):
            if node.name == test and isinstance(node.node, jinja2.nodes.Name) and node.node.name == variable:
                found.append(node.args[0].value)
    assert found, 'no %s is %s(...) in %s' % (variable, test, relpath)
    return found


def file_strings(relpath):
    """Every string literal of the YAML file RELPATH as Jinja decodes it."""
    return [node.value for dummy, source, dummy_where, options in yaml_expressions(os.path.join(REPO, relpath))
            for node in parse(source, False, **options).find_all(jinja2.nodes.Const) if isinstance(node.value, str)]


# The guards that moved from the roles' preflights into Python (gpu_watchdog_mig_unit, mps_pipe_root, the driver's
# package version, gpu_services_unit_prefix, gpu_services_plan_file and monitoring_prometheus_service) are held to
# the same values in tests/unit/plugins/module_utils/test_role_values.py.
@pytest.mark.parametrize('relpath, test, variable, accepted, refused', [
    # The unit template's ExecStart words that need no quoting.
    ('roles/gpu_services/templates/gpufleet-svc.service.j2', 'match', 'value',
     ['/usr/bin/podman', '--port=8080', 'registry.example.com/rerank:1.4'], ['a b', '/usr/bin/x\n', 'a"b', '$HOME']),
])
def test_a_guard_accepts_and_refuses_what_it_did(relpath, test, variable, accepted, refused):
    for pattern in file_patterns(relpath, test, variable):
        assert [value for value in accepted if not re.match(pattern, value)] == [], pattern
        assert [value for value in refused if re.match(pattern, value)] == [], pattern


def test_a_pattern_in_an_expression_keeps_its_single_backslashes():
    """In a {{ }} of a YAML value Ansible doubles the backslashes itself: '\\s' there is the regex \\s."""
    assert '\\1' in file_strings('roles/gpu_services/tasks/preflight.yml')  # regex_search's group, from "'\\1'"


@pytest.mark.parametrize('system, facts, supported', [
    ('ubuntu2204', {}, True),
    ('ubuntu2404', {}, True),
    ('ubuntu2204', {'distribution_version': '22.04.5'}, True),
    ('debian12', {}, True),
    ('ubuntu2204', {'distribution_version': '20.04', 'distribution_major_version': '20'}, False),
    ('debian12', {'distribution_version': '11.11', 'distribution_major_version': '11'}, False),
])
def test_the_container_toolkit_supports_the_systems_it_says(render, system, facts, supported):
    """Its Ubuntu check turns 22.04.5 into 22.04 with regex_replace's groups \\1\\2; as '\\1\\2' in the conditional
    they were chr(1) chr(2), and no Ubuntu was supported."""
    tasks = [task for task in role_yaml('container_toolkit', 'tasks/preflight.yml')
             if task['name'] == 'This host is a supported system and architecture']
    condition = tasks[0]['ansible.builtin.assert']['that'][0]
    toolkit = render('container_toolkit', system, facts=facts)
    # A {% if %}, which Ansible leaves to Jinja as it does a conditional (a {{ }} would have its backslashes doubled).
    template = '{%% if %s %%}yes{%% else %%}no{%% endif %%}' % condition
    assert toolkit.templar.template(trust_as_template(template)) == ('yes' if supported else 'no')
