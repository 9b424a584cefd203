// The API docs page: reads /openapi.json and lays it out (routes by tag, their parameters, bodies,
// responses and error codes, then every schema). Text goes in through textContent only.

const METHODS = ["get", "post", "put", "patch", "delete"];
const ERROR_CODES = "Error codes: ";

const statusLine = document.getElementById("docs-status");
const filter = document.getElementById("filter");

function el(tag, attributes = {}, ...children) {
  const element = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) {
    if (name === "className") element.className = value;
    else element.setAttribute(name, value);
  }
  for (const child of children.flat(Infinity)) {
    if (child !== null && child !== undefined) element.append(child);
  }
  return element;
}

/** Text with `backtick` spans as code. */
function rich(text) {
  return String(text)
    .split("`")
    .map((part, i) => (i % 2 ? el("code", {}, part) : part));
}

function refName(ref) {
  return ref.split("/").pop();
}

function resolve(api, schema) {
  if (schema && schema.$ref) return api.components.schemas[refName(schema.$ref)] || {};
  return schema || {};
}

/** A short type label (nodes: schema names are links). */
function typeOf(schema) {
  if (!schema) return ["any"];
  if (schema.$ref) return [el("a", { href: `#schema-${refName(schema.$ref)}` }, refName(schema.$ref))];
  const options = schema.anyOf || schema.oneOf;
  if (options) {
    const present = options.filter((option) => option.type !== "null");
    const labels = present.flatMap((option, i) => (i ? [" or ", ...typeOf(option)] : typeOf(option)));
    return present.length < options.length ? [...labels, " or null"] : labels;
  }
  if (schema.type === "array") return ["array of ", ...typeOf(schema.items)];
  if (schema.enum && !schema.type) return ["string"];
  const type = Array.isArray(schema.type) ? schema.type.join(" or ") : schema.type || "object";
  return [schema.format ? `${type} (${schema.format})` : type];
}

/** A list of values as code, comma-separated. */
function codes(values) {
  return values.flatMap((value, i) => [i ? ", " : "", el("code", {}, String(value))]);
}

/** Limits, allowed values and the default, in words. */
function constraints(schema) {
  const parts = [];
  const say = (key, words) => schema[key] !== undefined && parts.push([words.replace("N", schema[key])]);
  say("minLength", "at least N characters");
  say("maxLength", "at most N characters");
  say("minimum", "minimum N");
  say("maximum", "maximum N");
  say("maxItems", "at most N items");
  if (schema.pattern) parts.push(["matching ", el("code", {}, schema.pattern)]);
  if (schema.enum) parts.push(["one of ", ...codes(schema.enum)]);
  if (schema.default !== undefined && schema.default !== null) {
    parts.push(["default ", el("code", {}, JSON.stringify(schema.default))]);
  }
  return parts.flatMap((part, i) => (i ? ["; ", ...part] : part));
}

/** The fields of an object schema as a list; nested inline objects one level down. */
function fieldList(api, schema, depth = 0) {
  const target = resolve(api, schema);
  if (!target.properties) return null;
  const required = new Set(target.required || []);
  return el(
    "ul",
    { className: "fields" },
    Object.entries(target.properties).map(([name, property]) => {
      const details = [...(property.description ? rich(property.description) : [])];
      const limits = constraints(property);
      if (limits.length) details.push(details.length ? " (" : "", ...limits, details.length ? ")" : "");
      const nested = !property.$ref && property.properties && depth < 2 ? fieldList(api, property, depth + 1) : null;
      return el(
        "li",
        {},
        el("code", { className: "name" }, name),
        el("span", { className: "type" }, typeOf(property)),
        required.has(name) ? el("span", { className: "required" }, "required") : null,
        details.length ? el("span", { className: "description" }, details) : null,
        nested,
      );
    }),
  );
}

function parameters(api, operation) {
  if (!operation.parameters || !operation.parameters.length) return [];
  const items = operation.parameters.map((parameter) => {
    const schema = parameter.schema || {};
    const details = [`in ${parameter.in}`, ...(parameter.description ? ["; ", ...rich(parameter.description)] : [])];
    const limits = constraints(schema);
    if (limits.length) details.push("; ", ...limits);
    return el(
      "li",
      {},
      el("code", { className: "name" }, parameter.name),
      el("span", { className: "type" }, typeOf(schema)),
      parameter.required ? el("span", { className: "required" }, "required") : null,
      el("span", { className: "description" }, details),
    );
  });
  return [el("h4", {}, "Parameters"), el("ul", { className: "fields" }, items)];
}

function requestBody(api, operation) {
  const body = operation.requestBody;
  if (!body || !body.content) return [];
  const types = Object.keys(body.content);
  const schema = body.content[types[0]].schema;
  const fields = fieldList(api, schema);
  return [
    el("h4", {}, "Request body"),
    el("p", {}, "As ", codes(types), "."),
    fields || el("p", {}, typeOf(schema)),
  ];
}

function responses(api, operation) {
  const items = Object.entries(operation.responses || {}).map(([code, response]) => {
    const description = response.description || "";
    const text = description.startsWith(ERROR_CODES)
      ? codes(description.slice(ERROR_CODES.length).split(", "))
      : rich(description);
    const content = response.content ? Object.values(response.content)[0] : null;
    const schema = content && content.schema && content.schema.$ref ? [" → ", ...typeOf(content.schema)] : [];
    return el("li", {}, el("span", { className: "code" }, code), " ", text, schema);
  });
  return [el("h4", {}, "Responses"), el("ul", { className: "responses" }, items)];
}

function operationCard(api, path, method, operation) {
  const secured = (operation.security || api.security || []).length > 0;
  const card = el(
    "section",
    { className: "card operation", id: operation.operationId || `${method}-${path}`, "aria-label": `${method.toUpperCase()} ${path}` },
    el("h3", {}, el("span", { className: `method ${method}` }, method.toUpperCase()), el("code", {}, path)),
    operation.summary ? el("p", { className: "summary" }, operation.summary) : null,
    operation.description ? el("p", {}, rich(operation.description)) : null,
    el("p", { className: "auth-note" }, secured ? "Needs a bearer token." : "No authentication."),
    parameters(api, operation),
    requestBody(api, operation),
    responses(api, operation),
  );
  card.dataset.search = [method, path, operation.summary, operation.description, ...(operation.tags || [])]
    .join(" ")
    .toLowerCase();
  return card;
}

function render(api) {
  const groups = new Map((api.tags || []).map((tag) => [tag.name, []]));
  for (const [path, item] of Object.entries(api.paths || {})) {
    for (const method of METHODS) {
      if (!item[method]) continue;
      const tag = (item[method].tags || ["other"])[0];
      if (!groups.has(tag)) groups.set(tag, []);
      groups.get(tag).push(operationCard(api, path, method, item[method]));
    }
  }
  const toc = document.getElementById("toc-list");
  const operations = document.getElementById("operations");
  for (const [tag, cards] of groups) {
    const id = `tag-${tag}`;
    const title = tag.replace(/[-_]/g, " ");
    operations.append(el("section", { className: "tag-group", id, "aria-label": title }, el("h2", {}, title), cards));
    toc.append(el("li", {}, el("a", { href: `#${id}` }, title)));
  }
  const schemas = Object.entries((api.components && api.components.schemas) || {});
  const schemaList = document.getElementById("schema-list");
  for (const [name, schema] of schemas) {
    schemaList.append(
      el(
        "section",
        { className: "card schema", id: `schema-${name}`, "aria-label": name },
        el("h3", {}, name),
        schema.description ? el("p", {}, rich(schema.description)) : null,
        fieldList(api, schema) || el("p", {}, typeOf(schema), " ", constraints(schema)),
      ),
    );
  }
  toc.append(el("li", {}, el("a", { href: "#schemas" }, "schemas")));
  document.getElementById("toc").hidden = false;
  document.getElementById("schemas").hidden = schemas.length === 0;
  const baseUrl = api.servers && api.servers[0] && api.servers[0].url;
  document.getElementById("base-url").textContent = baseUrl || window.location.origin;
  const count = operations.querySelectorAll(".operation").length;
  statusLine.textContent = `${count} routes, API version ${api.info.version}.`;
  filter.disabled = false;
  const target = window.location.hash && document.getElementById(window.location.hash.slice(1));
  if (target) target.scrollIntoView();
}

function applyFilter() {
  const words = filter.value.toLowerCase().split(/\s+/).filter(Boolean);
  let shown = 0;
  for (const group of document.querySelectorAll("#operations .tag-group")) {
    let visible = 0;
    for (const card of group.querySelectorAll(".operation")) {
      card.hidden = !words.every((word) => card.dataset.search.includes(word));
      if (!card.hidden) visible += 1;
    }
    group.hidden = visible === 0;
    shown += visible;
  }
  statusLine.textContent = words.length ? `${shown} routes match “${filter.value.trim()}”.` : `${shown} routes.`;
}

function fail(detail) {
  statusLine.textContent = "";
  document.getElementById("docs-error-detail").textContent = detail;
  document.getElementById("docs-error").hidden = false;
}

async function load() {
  let response;
  try {
    response = await fetch("/openapi.json", { headers: { Accept: "application/json" } });
  } catch {
    fail("The server could not be reached.");
    return;
  }
  if (!response.ok) {
    fail(`The server answered ${response.status} ${response.statusText}`.trim() + ".");
    return;
  }
  let description;
  try {
    description = await response.json();
  } catch {
    fail("The server's answer was not an API description.");
    return;
  }
  render(description);
}

filter.addEventListener("input", applyFilter);
load();
