/* Label and field selectors: grammar, matching, canonical strings, errors. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "api/selector.h"
#include "base/err.h"
#include "base/jx.h"

#include <stdlib.h>
#include <string.h>

static json_t *js(const char *text)
{
	json_t *v = jx_parse(text, strlen(text));
	assert_non_null(v);
	return v;
}

/* Does `sel` (a labelSelector string) match the labels given as JSON? */
static bool lmatch(const char *sel, const char *labels)
{
	struct label_selector *s = label_selector_parse(sel);
	json_t *l = labels ? js(labels) : NULL;
	if (!s)
		fail_msg("parse %s: %s", sel, err_msg());
	bool m = label_selector_match(s, l);
	json_decref(l);
	label_selector_free(s);
	return m;
}

/* The canonical string of a parsed label selector, compared to want. */
static void lcanon(const char *sel, const char *want)
{
	struct label_selector *s = label_selector_parse(sel);
	if (!s)
		fail_msg("parse %s: %s", sel, err_msg());
	char *got = label_selector_string(s);
	assert_string_equal(got, want);
	free(got);
	label_selector_free(s);
}

/* The selector must fail with ERR_INVALID and a message containing want. */
static void lbad(const char *sel, const char *want)
{
	err_clear();
	struct label_selector *s = label_selector_parse(sel);
	if (s) {
		label_selector_free(s);
		fail_msg("'%s' parsed but should not", sel);
	}
	if (!strstr(err_msg(), want))
		fail_msg("'%s': message \"%s\" lacks \"%s\"", sel, err_msg(), want);
}

static void lbad_exact(const char *sel, const char *want)
{
	err_clear();
	struct label_selector *s = label_selector_parse(sel);
	assert_null(s);
	assert_string_equal(err_msg(), want);
}

static void test_label_equality(void **state)
{
	const char *l = "{\"app\":\"web\",\"tier\":\"front\",\"empty\":\"\"}";
	assert_true(lmatch("app=web", l));
	assert_true(lmatch("app==web", l));
	assert_false(lmatch("app=db", l));
	assert_false(lmatch("app!=web", l));
	assert_true(lmatch("app!=db", l));
	assert_true(lmatch("missing!=x", l)); /* != also matches absence */
	assert_false(lmatch("missing=x", l));
	assert_true(lmatch("empty=", l));
	assert_false(lmatch("missing=", l));
	assert_true(lmatch("app=web,tier=front", l));
	assert_false(lmatch("app=web,tier=back", l));
	assert_true(lmatch("app=web", "{\"app\":\"web\"}"));
	assert_false(lmatch("app=web", NULL));
	assert_true(lmatch("app!=web", NULL));
	/* "in" and "notin" are plain values after '=' */
	assert_true(lmatch("a=in,b=notin", "{\"a\":\"in\",\"b\":\"notin\"}"));
	/* non-string label values count as absent */
	assert_false(lmatch("a", "{\"a\":5}"));
}

static void test_label_sets(void **state)
{
	const char *l = "{\"env\":\"prod\",\"tier\":\"db\"}";
	assert_true(lmatch("env in (prod,dev)", l));
	assert_false(lmatch("env in (qa,dev)", l));
	assert_false(lmatch("missing in (prod)", l));
	assert_true(lmatch("env notin (qa)", l));
	assert_false(lmatch("env notin (qa,prod)", l));
	assert_true(lmatch("missing notin (prod)", l));
	assert_true(lmatch("env", l));
	assert_false(lmatch("missing", l));
	assert_true(lmatch("!missing", l));
	assert_false(lmatch("!env", l));
	assert_true(lmatch("env in (prod),tier notin (web),!gpu,tier", l));
	/* empty members: "()" and "(a,)" hold the empty value */
	assert_true(lmatch("x in ()", "{\"x\":\"\"}"));
	assert_true(lmatch("x in (a,)", "{\"x\":\"\"}"));
	assert_true(lmatch("x in (,a)", "{\"x\":\"\"}"));
	assert_true(lmatch("x in (a,,b)", "{\"x\":\"\"}"));
	assert_false(lmatch("x in (a,b)", "{\"x\":\"\"}"));
	/* keywords as values inside the set */
	assert_true(lmatch("x in (in,notin)", "{\"x\":\"notin\"}"));
}

static void test_label_numeric(void **state)
{
	assert_true(lmatch("n>1", "{\"n\":\"2\"}"));
	assert_false(lmatch("n>1", "{\"n\":\"1\"}"));
	assert_true(lmatch("n<5", "{\"n\":\"4\"}"));
	assert_false(lmatch("n<5", "{\"n\":\"5\"}"));
	assert_false(lmatch("n<5", "{}"));
	assert_false(lmatch("n<5", "{\"n\":\"abc\"}")); /* not a number: no match */
	assert_true(lmatch("n>10", "{\"n\":\"11\"}"));  /* numeric, not lexical */
	assert_true(lmatch("n<100", "{\"n\":\"-3\"}"));
	assert_true(lmatch("n>1,n<3", "{\"n\":\"2\"}"));
}

static void test_label_whitespace(void **state)
{
	const char *l = "{\"app\":\"web\",\"env\":\"prod\"}";
	assert_true(lmatch("  app = web ", l));
	assert_true(lmatch("app=web , env in ( prod , dev )", l));
	assert_true(lmatch("\tapp\t!=\tdb\n", l));
	assert_true(lmatch(" ! gpu ", l));
	assert_true(lmatch("env\tnotin\t(dev)", l));
	assert_true(lmatch("", l));
	assert_true(lmatch("   ", l));
	lcanon(" app = web ,  env in ( prod , dev ) ", "app=web,env in (dev,prod)");
}

static void test_label_canonical(void **state)
{
	lcanon("", "");
	lcanon("tier in (b,a),app=web", "app=web,tier in (a,b)");
	lcanon("z,!y,x notin (c,a,b),w!=1,v==2,u>3,t<4", "t<4,u>3,v==2,w!=1,x notin (a,b,c),!y,z");
	lcanon("a in (x,x,y)", "a in (x,y)"); /* a set: duplicates collapse */
	lcanon("a in ()", "a in ()");
	lcanon("a=", "a=");
	/* equal keys keep their input order */
	lcanon("b=1,a!=2,a=3", "a!=2,a=3,b=1");
	lcanon("example.com/app=web", "example.com/app=web");

	struct label_selector *s = label_selector_parse("");
	assert_non_null(s);
	assert_true(label_selector_empty(s));
	assert_true(label_selector_match(s, NULL));
	label_selector_free(s);
	s = label_selector_parse("a");
	assert_false(label_selector_empty(s));
	label_selector_free(s);
	label_selector_free(NULL);
}

static void test_label_key_value_syntax(void **state)
{
	assert_true(lmatch("example.com/app=v", "{\"example.com/app\":\"v\"}"));
	assert_true(lmatch("a.b_c-d=E.f_G-9", "{\"a.b_c-d\":\"E.f_G-9\"}"));
	assert_int_equal(label_key_validate("app"), 0);
	assert_int_equal(label_key_validate("kubernetes.io/hostname"), 0);
	assert_int_equal(label_key_validate("node.kubernetes.io/exclude-from-external-lbs"), 0);
	assert_int_equal(label_key_validate("-a"), ERR_INVALID);
	assert_non_null(strstr(err_msg(), "name part must consist of alphanumeric characters"));
	assert_int_equal(label_key_validate("Example.com/a"), ERR_INVALID);
	assert_non_null(strstr(err_msg(), "prefix part a lowercase RFC 1123 subdomain"));
	assert_int_equal(label_key_validate("/a"), ERR_INVALID);
	assert_string_equal(err_msg(), "prefix part must be non-empty");
	assert_int_equal(label_key_validate("a/"), ERR_INVALID);
	assert_non_null(strstr(err_msg(), "name part must be non-empty; name part must consist"));
	assert_int_equal(label_key_validate("a/b/c"), ERR_INVALID);
	assert_non_null(strstr(err_msg(), "a qualified name must consist of"));
	assert_non_null(strstr(err_msg(), "(e.g. 'example.com/MyName')"));
	char name[70];
	memset(name, 'a', 64);
	name[64] = '\0';
	assert_int_equal(label_key_validate(name), ERR_INVALID);
	assert_string_equal(err_msg(), "name part must be no more than 63 characters");
	name[63] = '\0';
	assert_int_equal(label_key_validate(name), 0);

	assert_int_equal(label_value_validate(""), 0);
	assert_int_equal(label_value_validate("v1.2_3-x"), 0);
	assert_int_equal(label_value_validate("-v"), ERR_INVALID);
	assert_string_equal(
	    err_msg(),
	    "a valid label must be an empty string or consist of alphanumeric characters, '-', "
	    "'_' or '.', and must start and end with an alphanumeric character (e.g. "
	    "'MyValue',  or 'my_value',  or '12345', regex used for validation is "
	    "'(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')");
	assert_int_equal(label_value_validate("a b"), ERR_INVALID);
}

static void test_label_errors(void **state)
{
	lbad_exact("a in x", "unable to parse requirement: found 'x' expected: '('");
	lbad_exact("a in (", "unable to parse requirement: found '', expected: ',', ')' or "
	                     "identifier");
	lbad_exact("a in (b", "unable to parse requirement: found '', expected: ',' or ')'");
	lbad_exact("a in (b,", "unable to parse requirement: found '', expected: ',', or "
	                       "identifier");
	lbad_exact("=b", "found '=', expected: !, identifier, or 'end of string'");
	lbad_exact("a=b=c", "found '=', expected: ',' or 'end of string'");
	lbad_exact("a=b,", "found '', expected: identifier after ','");
	lbad_exact("a=b,,c", "found ',', expected: identifier after ','");
	lbad_exact("a b", "unable to parse requirement: found 'b', expected: in, notin, =, ==, "
	                  "!=, gt, lt");
	lbad_exact("a=(", "unable to parse requirement: found '(', expected: identifier");
	lbad_exact("!", "unable to parse requirement: found '', expected: identifier");
	lbad_exact("!a=b", "found '=', expected: ',' or 'end of string'");
	lbad_exact("a>x", "unable to parse requirement: values[0]: Invalid value: \"x\": for "
	                  "'Gt', 'Lt' operators, the value must be an integer");
	lbad("a>", "for 'Gt', 'Lt' operators, the value must be an integer");
	lbad_exact("-a=b",
	           "unable to parse requirement: <nil>: Invalid value: \"-a\": name part must "
	           "consist of alphanumeric characters, '-', '_' or '.', and must start and end "
	           "with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', "
	           "regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')");
	lbad("a/b/c=d", "<nil>: Invalid value: \"a/b/c\": a qualified name must consist");
	lbad("Foo.com/a", "prefix part a lowercase RFC 1123 subdomain");

	char sel[128], want[200];
	memset(want, 0, sizeof(want));
	strcpy(sel, "a=");
	memset(sel + 2, 'v', 64);
	sel[66] = '\0';
	snprintf(want, sizeof(want),
	         "unable to parse requirement: values[0][a]: Invalid value: \"%s\": must be no "
	         "more than 63 characters",
	         sel + 2);
	lbad_exact(sel, want);
	sel[65] = '\0'; /* 63 characters is fine */
	assert_true(lmatch(sel, NULL) == false);

	lbad("a=-b", "values[0][a]: Invalid value: \"-b\": a valid label must be an empty string");
	lbad("a in (ok,-x)", "values[0][a]: Invalid value: \"-x\"");
	/* several value errors aggregate as [e1, e2] */
	lbad("a in (-x,-y)", "unable to parse requirement: [values[0][a]: Invalid value: \"-x\"");
	lbad("a>-1", "a valid label must be an empty string");
	assert_true(lmatch("a==", "{\"a\":\"\"}"));
	assert_int_equal(err_http_status(ERR_INVALID), 400);
}

static void test_label_from_json(void **state)
{
	json_t *j = js("{\"matchLabels\":{\"app\":\"web\"},\"matchExpressions\":["
	               "{\"key\":\"tier\",\"operator\":\"In\",\"values\":[\"b\",\"a\"]},"
	               "{\"key\":\"env\",\"operator\":\"NotIn\",\"values\":[\"dev\"]},"
	               "{\"key\":\"gpu\",\"operator\":\"DoesNotExist\"},"
	               "{\"key\":\"zone\",\"operator\":\"Exists\",\"values\":[]}]}");
	struct label_selector *s = label_selector_from_json(j);
	json_decref(j);
	assert_non_null(s);
	char *str = label_selector_string(s);
	assert_string_equal(str, "app=web,env notin (dev),!gpu,tier in (a,b),zone");
	free(str);
	json_t *l = js("{\"app\":\"web\",\"tier\":\"a\",\"zone\":\"z1\"}");
	assert_true(label_selector_match(s, l));
	json_object_set_new(l, "gpu", json_string("yes"));
	assert_false(label_selector_match(s, l));
	json_decref(l);
	assert_false(label_selector_empty(s));
	label_selector_free(s);

	/* nil selector matches nothing; an empty one everything */
	s = label_selector_from_json(NULL);
	assert_non_null(s);
	assert_false(label_selector_match(s, NULL));
	assert_false(label_selector_empty(s));
	str = label_selector_string(s);
	assert_string_equal(str, "");
	free(str);
	label_selector_free(s);
	s = label_selector_from_json(json_null());
	assert_false(label_selector_match(s, NULL));
	label_selector_free(s);
	j = js("{}");
	s = label_selector_from_json(j);
	assert_true(label_selector_empty(s));
	assert_true(label_selector_match(s, NULL));
	label_selector_free(s);
	json_decref(j);
	j = js("{\"matchLabels\":{},\"matchExpressions\":[]}");
	s = label_selector_from_json(j);
	assert_true(label_selector_empty(s));
	label_selector_free(s);
	json_decref(j);
}

static void from_json_bad(const char *text, const char *path, const char *want)
{
	json_t *j = js(text);
	err_clear();
	struct label_selector *s = label_selector_from_json_at(j, path);
	json_decref(j);
	if (s) {
		label_selector_free(s);
		fail_msg("%s accepted", text);
	}
	if (!strstr(err_msg(), want))
		fail_msg("%s: message \"%s\" lacks \"%s\"", text, err_msg(), want);
}

static void test_label_from_json_errors(void **state)
{
	from_json_bad("{\"matchExpressions\":[{\"key\":\"a\",\"operator\":\"In\"}]}", NULL,
	              "matchExpressions[0].values: Required value: must be specified when "
	              "`operator` is 'In' or 'NotIn'");
	from_json_bad("{\"matchExpressions\":[{\"key\":\"a\",\"operator\":\"NotIn\","
	              "\"values\":[]}]}",
	              "spec.selector",
	              "spec.selector.matchExpressions[0].values: Required value: must be "
	              "specified when `operator` is 'In' or 'NotIn'");
	from_json_bad("{\"matchExpressions\":[{\"key\":\"a\",\"operator\":\"Exists\","
	              "\"values\":[\"x\"]}]}",
	              NULL,
	              "matchExpressions[0].values: Forbidden: may not be specified when "
	              "`operator` is 'Exists' or 'DoesNotExist'");
	from_json_bad("{\"matchExpressions\":[{\"key\":\"a\",\"operator\":\"Gt\","
	              "\"values\":[\"1\"]}]}",
	              NULL,
	              "matchExpressions[0].operator: Invalid value: \"Gt\": not a valid selector "
	              "operator");
	from_json_bad("{\"matchExpressions\":[{\"key\":\"-a\",\"operator\":\"Exists\"}]}", NULL,
	              "matchExpressions[0].key: Invalid value: \"-a\": name part must consist");
	from_json_bad("{\"matchLabels\":{\"app\":\"-web\"}}", NULL,
	              "matchLabels: Invalid value: \"-web\": a valid label must be");
	from_json_bad("{\"matchLabels\":{\"a/b/c\":\"x\"}}", NULL,
	              "matchLabels: Invalid value: \"a/b/c\": a qualified name");
	from_json_bad("{\"matchLabels\":{\"app\":5}}", NULL, "matchLabels: Invalid value: 5");
	from_json_bad("{\"matchExpressions\":[{\"key\":\"a\",\"operator\":\"In\","
	              "\"values\":[\"ok\",\"-x\"]}]}",
	              NULL, "matchExpressions[0].values[1]: Invalid value: \"-x\"");
	/* several errors are bracketed */
	from_json_bad("{\"matchLabels\":{\"-a\":\"b\"},\"matchExpressions\":[{\"key\":\"a\","
	              "\"operator\":\"In\"}]}",
	              NULL, "[matchLabels: Invalid value: \"-a\"");
	from_json_bad("[]", "spec.selector", "spec.selector: Invalid value: []: must be an object");
	from_json_bad("{\"matchExpressions\":{}}", NULL, "matchExpressions: Invalid value");
}

/* ---- field selectors ---- */

static struct field_selector *fparse(const char *text)
{
	struct field_selector *s = field_selector_parse(text);
	if (!s)
		fail_msg("parse %s: %s", text, err_msg());
	return s;
}

static void fcanon(const char *text, const char *want)
{
	struct field_selector *s = fparse(text);
	char *got = field_selector_string(s);
	assert_string_equal(got, want);
	free(got);
	field_selector_free(s);
}

static void fbad(const char *text, const char *want)
{
	err_clear();
	struct field_selector *s = field_selector_parse(text);
	if (s) {
		field_selector_free(s);
		fail_msg("'%s' parsed but should not", text);
	}
	assert_string_equal(err_msg(), want);
}

static void test_field_parse_and_string(void **state)
{
	fcanon("", "");
	fcanon("spec.nodeName=node-1", "spec.nodeName=node-1");
	fcanon("spec.nodeName==node-1", "spec.nodeName=node-1");
	/* kubectl's term order does not matter: terms are sorted */
	fcanon("status.phase!=Failed,spec.nodeName=node-1",
	       "spec.nodeName=node-1,status.phase!=Failed");
	fcanon("spec.nodeName=node-1,status.phase!=Failed",
	       "spec.nodeName=node-1,status.phase!=Failed");
	fcanon("involvedObject.namespace=,involvedObject.name=p",
	       "involvedObject.name=p,involvedObject.namespace=");
	/* escapes survive a round trip */
	fcanon("a=x\\,y\\=z\\\\w", "a=x\\,y\\=z\\\\w");
	fcanon("a=b,,c=d,", "a=b,c=d");
	fcanon("=", "");

	struct field_selector *s = fparse("a=x\\,y\\=z\\\\w");
	assert_string_equal(field_selector_exact(s, "a"), "x,y=z\\w");
	field_selector_free(s);

	s = fparse("");
	assert_true(field_selector_empty(s));
	field_selector_free(s);
	s = fparse("a!=b");
	assert_false(field_selector_empty(s));
	field_selector_free(s);
	field_selector_free(NULL);
}

static void test_field_errors(void **state)
{
	fbad("abc", "invalid selector: 'abc'; can't understand 'abc'");
	fbad("a=b,junk", "invalid selector: 'a=b,junk'; can't understand 'junk'");
	fbad("a=b=c", "invalid field selector: unescaped character in value: 61");
	fbad("a=b\\x", "invalid field selector: invalid escape sequence: \\x");
	fbad("a=b\\", "invalid field selector: invalid escape sequence: \\");
	assert_int_equal(err_http_status(ERR_INVALID), 400);
}

static void test_field_match(void **state)
{
	json_t *pod = js("{\"metadata\":{\"name\":\"p1\",\"namespace\":\"default\"},"
	                 "\"spec\":{\"nodeName\":\"node-1\",\"hostNetwork\":true,"
	                 "\"priority\":7},\"status\":{\"phase\":\"Running\"}}");
	struct field_selector *s;

	s = fparse("spec.nodeName=node-1,status.phase!=Failed");
	assert_true(field_selector_match(s, pod));
	field_selector_free(s);
	s = fparse("spec.nodeName=node-2");
	assert_false(field_selector_match(s, pod));
	field_selector_free(s);
	s = fparse("status.phase!=Running");
	assert_false(field_selector_match(s, pod));
	field_selector_free(s);
	s = fparse("metadata.name==p1,metadata.namespace=default");
	assert_true(field_selector_match(s, pod));
	field_selector_free(s);
	/* missing fields read as "" */
	s = fparse("spec.schedulerName=,status.nominatedNodeName=");
	assert_true(field_selector_match(s, pod));
	field_selector_free(s);
	s = fparse("spec.missing.deeper!=");
	assert_false(field_selector_match(s, pod));
	field_selector_free(s);
	s = fparse("spec.nodeName=");
	assert_false(field_selector_match(s, pod));
	field_selector_free(s);
	/* scalars by their text; structures read as "" */
	s = fparse("spec.hostNetwork=true,spec.priority=7,spec=");
	assert_true(field_selector_match(s, pod));
	field_selector_free(s);
	s = fparse("spec.hostNetwork=false");
	assert_false(field_selector_match(s, pod));
	field_selector_free(s);
	/* empty selector (and NULL) match everything */
	s = fparse("");
	assert_true(field_selector_match(s, pod));
	assert_true(field_selector_match(s, NULL));
	field_selector_free(s);
	assert_true(field_selector_match(NULL, pod));
	json_decref(pod);

	json_t *ev = js("{\"involvedObject\":{\"uid\":\"u-1\",\"name\":\"p1\"}}");
	s = fparse("involvedObject.uid=u-1,involvedObject.namespace=,involvedObject.name=p1");
	assert_true(field_selector_match(s, ev));
	field_selector_free(s);
	json_decref(ev);
}

static void test_field_validate_and_exact(void **state)
{
	static const char *const pods[] = {"metadata.name", "metadata.namespace", "spec.nodeName",
	                                   "status.phase", NULL};
	struct field_selector *s = fparse("spec.nodeName=node-1,status.phase!=Failed");

	assert_int_equal(field_selector_validate(s, pods), 0);
	assert_string_equal(field_selector_exact(s, "spec.nodeName"), "node-1");
	assert_null(field_selector_exact(s, "status.phase")); /* != is not exact */
	assert_null(field_selector_exact(s, "metadata.name"));
	field_selector_free(s);

	s = fparse("metadata.name=p1,spec.bogus=x");
	assert_int_equal(field_selector_validate(s, pods), ERR_INVALID);
	assert_string_equal(err_msg(), "field label not supported: spec.bogus");
	assert_string_equal(field_selector_exact(s, "metadata.name"), "p1");
	assert_int_equal(field_selector_validate(s, NULL), ERR_INVALID);
	assert_string_equal(err_msg(), "field label not supported: metadata.name");
	field_selector_free(s);

	s = fparse("involvedObject.namespace=");
	assert_string_equal(field_selector_exact(s, "involvedObject.namespace"), "");
	field_selector_free(s);

	s = fparse("");
	assert_int_equal(field_selector_validate(s, NULL), 0);
	assert_null(field_selector_exact(s, "metadata.name"));
	field_selector_free(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_label_equality),
	    cmocka_unit_test(test_label_sets),
	    cmocka_unit_test(test_label_numeric),
	    cmocka_unit_test(test_label_whitespace),
	    cmocka_unit_test(test_label_canonical),
	    cmocka_unit_test(test_label_key_value_syntax),
	    cmocka_unit_test(test_label_errors),
	    cmocka_unit_test(test_label_from_json),
	    cmocka_unit_test(test_label_from_json_errors),
	    cmocka_unit_test(test_field_parse_and_string),
	    cmocka_unit_test(test_field_errors),
	    cmocka_unit_test(test_field_match),
	    cmocka_unit_test(test_field_validate_and_exact),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
