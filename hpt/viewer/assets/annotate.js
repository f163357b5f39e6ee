// hpt annotate: one sample at a time, four criteria scored 1-5, each annotation posted back
// and saved by the server as it arrives. Text from the dataset is shown as text, never markup.
(() => {
  const config = JSON.parse(document.getElementById("hpt-annotate").textContent);
  const $ = (id) => document.getElementById(id);
  const chosen = {};
  let current = null;

  $("guidance").textContent = config.guidance;

  function buildCriteria() {
    for (const c of config.criteria) {
      const box = document.createElement("fieldset");
      box.className = "criterion";
      box.dataset.criterion = c.key;
      const title = document.createElement("h4");
      title.textContent = c.name;
      const text = document.createElement("p");
      text.textContent = c.definition;
      const scale = document.createElement("div");
      scale.className = "scale";
      for (let score = 1; score <= 5; score++) {
        const b = document.createElement("button");
        b.type = "button";
        b.textContent = String(score);
        b.dataset.score = String(score);
        b.setAttribute("aria-pressed", "false");
        b.setAttribute("aria-label", `${c.name}: ${score}`);
        b.addEventListener("click", () => choose(c.key, score));
        scale.append(b);
      }
      box.append(title, text, scale);
      $("criteria").append(box);
    }
  }

  function choose(key, score) {
    chosen[key] = score;
    for (const b of document.querySelectorAll(`[data-criterion="${key}"] button`)) {
      b.setAttribute("aria-pressed", String(Number(b.dataset.score) === score));
    }
    $("save").disabled = config.criteria.some((c) => !chosen[c.key]);
  }

  function show(state) {
    const skipped = state.skipped ? ` · ${state.skipped} skipped` : "";
    $("progress").textContent =
      `${state.scored} of ${state.total} scored by ${config.annotator}${skipped}`;
    current = state.sample;
    for (const c of config.criteria) delete chosen[c.key];
    for (const b of document.querySelectorAll(".scale button")) b.setAttribute("aria-pressed", "false");
    $("save").disabled = true;
    if (!current) {
      $("sample").hidden = true;
      $("scores").hidden = true;
      $("finished").hidden = false;
      $("finished-text").textContent = state.skipped
        ? `Every other sample is scored; the ${state.skipped} skipped come back next session. You may close this tab.`
        : "Every sample of the representative set is scored. You may close this tab.";
      document.body.dataset.sample = "";
      document.body.dataset.finished = "1";
      return;
    }
    $("sample-id").textContent = current.category
      ? `${current.id} · ${current.category}` : current.id;
    const blocks = $("blocks");
    blocks.replaceChildren();
    for (const [label, text] of current.blocks) {
      const h = document.createElement("h3");
      h.textContent = label;
      const pre = document.createElement("pre");
      pre.textContent = text;
      blocks.append(h, pre);
    }
    $("answer").textContent = current.answer;
    $("sample").hidden = false;
    $("scores").hidden = false;
    document.body.dataset.sample = current.id;
  }

  async function call(path, body) {
    const init = body === undefined ? {} : {
      method: "POST",
      headers: { "Content-Type": "application/json", "X-HPT-Token": config.token },
      body: JSON.stringify(body),
    };
    const response = await fetch(path, init);
    const data = await response.json();
    if (!response.ok) throw new Error(data.error || `HTTP ${response.status}`);
    return data;
  }

  async function act(path, body) {
    $("message").textContent = "";
    $("message").className = "";
    try {
      show(await call(path, body));
    } catch (err) {
      $("message").textContent = `not saved: ${err.message}`;
      $("message").className = "error";
    }
  }

  $("scores").addEventListener("submit", (event) => {
    event.preventDefault();
    if (!current || $("save").disabled) return;
    $("save").disabled = true;  // one post per sample, however fast the clicks
    act("api/annotate", { sample_id: current.id, scores: { ...chosen } });
  });
  $("skip").addEventListener("click", () => current && act("api/skip", { sample_id: current.id }));

  buildCriteria();
  act("api/next").then(() => { document.body.dataset.ready = "1"; });
})();
