"""Words the synthetic transcripts are made of, and the 1-3 word queries asked of them.

Two kinds of words:

- A ranked *technical vocabulary*: about 400 real programming words first, then pronounceable
  pseudo-words built from syllables, up to ``size`` words. A word's probability follows Zipf's
  law, ``1 / (rank + 2.7) ** s``, so a few words are in a large share of the events (like
  ``error`` or ``test`` in real transcripts) and most are rare. ``size`` and ``s`` control the
  hit rates of queries: queries draw their words from the same distribution as the text.
- *Languages* for the prose of a session: English, French, German and Spanish (accented Latin),
  Russian (Cyrillic), Greek, Chinese and Japanese (CJK, written without spaces), each with
  content words and function words. Code identifiers stay ASCII whatever the language, as in
  real sessions; emoji are sprinkled over some messages.

Everything is drawn from a caller's ``random.Random``, so the same seed gives the same text.
"""

from __future__ import annotations

import bisect
import itertools
import random
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["EMOJI", "LANGUAGES", "Language", "Query", "Vocabulary", "fold_accents"]


def _words(text: str) -> tuple[str, ...]:
    return tuple(text.split())


# Real words of coding-agent sessions, in no particular order: they take the top ranks.
TECH_WORDS = _words(
    """
    error test file index search session query cursor page token model agent tool call
    response request server client config build deploy migration schema table column row
    database sqlite postgres clickhouse tantivy bm25 rank score snippet filter limit offset
    thread process memory cache latency throughput benchmark profile trace span metric log
    warning exception panic stack frame function method class struct trait interface module
    package import export version release branch commit merge rebase diff patch review lint
    format typecheck mypy ruff pytest fixture mock assert coverage parser tokenizer analyzer
    unicode ascii utf8 encoding decode json yaml toml proto grpc http rest gateway endpoint
    route handler middleware auth oauth secret key password hash salt encrypt sign verify
    user role permission scope project workspace repo path directory folder worktree git
    shell command script terminal stdout stderr exit status code signal timeout retry backoff
    queue worker task job schedule cron batch stream chunk buffer flush fsync commit rollback
    transaction lock mutex atomic async await future promise callback event loop reactor
    socket port address host domain dns tls certificate proxy load balancer replica shard
    partition cluster node pod container docker kubernetes helm image registry volume mount
    network latency bandwidth packet frame header body payload envelope message channel
    topic subscribe publish consumer producer offset watermark checkpoint snapshot restore
    backup archive compress gzip zstd lz4 parquet arrow columnar vector embedding dimension
    cosine similarity neighbor centroid cluster kmeans recall precision relevance ranking
    tokenize stem lemma stopword phrase prefix suffix wildcard fuzzy regex pattern match
    replace split join trim strip pad width height size length count total average median
    percentile histogram bucket counter gauge alert dashboard panel chart graph axis legend
    render template component widget button input form field label select option modal
    dialog tooltip layout grid flex margin padding border color theme font style css html
    react vue svelte typescript javascript python rust golang java kotlin swift ruby php
    compiler linker binary artifact wheel crate gem npm pip cargo poetry uv venv toolchain
    refactor rename extract inline cleanup deprecate remove delete create update insert upsert
    validate sanitize escape quote parse serialize deserialize marshal unmarshal convert cast
    integer float string boolean array list map dict set tuple option result enum variant
    null undefined none empty default fallback override inherit extend compose wrap adapter
    factory builder singleton registry plugin extension hook trigger listener observer
    pipeline stage step phase ingest transform load export import sync replicate mirror
    redact mask audit compliance policy quota rate limiter throttle budget cost invoice billing
    account tenant organization team member invite signup login logout refresh revoke expire
    spec contract invariant property fuzz regression flaky deterministic seed random shuffle
    sort order ascending descending keyset pagination anchor stale tamper mismatch reopen
    harness codex claude cursor transcript rollout turn ordinal terminal completed reasoning
    """
)

_ONSETS = _words("b c d f g h j k l m n p r s t v w z br cr dr fl gr kl pl pr sk st tr")
_VOWELS = _words("a e i o u ai ea io ou")
_CODAS = ("", "", "", "n", "r", "s", "l", "x", "nt", "rk", "st")


@dataclass(frozen=True, slots=True)
class Language:
    """A language prose is written in: content words, function words, how words join."""

    name: str
    words: tuple[str, ...]
    glue: tuple[str, ...]
    joiner: str
    full_stop: str
    share: float  # of the sessions

    @property
    def cjk(self) -> bool:
        """Written without spaces between words."""
        return self.joiner == ""


LANGUAGES: tuple[Language, ...] = (
    Language(
        "en",
        _words(
            """
            fix check look figure understand change update write read run compare explain
            improve measure guess notice expect break work fail pass slow fast broken wrong
            right better simple careful quick detail reason problem solution approach idea
            question answer example case issue note plan step result outcome behaviour
            """
        ),
        _words(
            """
            the the the a a an to to of of in in and and is is it it that this we we
            should should can will not be for for on with with as at by from so then
            now also but or if when why how what which there here our your its
            """
        ),
        " ",
        ".",
        0.70,
    ),
    Language(
        "fr",
        _words(
            """
            résumé café été déploiement requête fenêtre problème mémoire dépôt paramètre
            vérifier créer modèle données sécurité répertoire fichier erreur serveur tâche
            réponse clé début élément équipe schéma intégré préféré mise à jour déjà
            """
        ),
        _words("le la les un une de des du et est que qui pour dans sur avec pas il nous"),
        " ",
        ".",
        0.06,
    ),
    Language(
        "de",
        _words(
            """
            Größe Prüfung Lösung Schlüssel Änderung Übersicht Datei Fehler Speicher Verzeichnis
            Abhängigkeit Zugriff Schnittstelle Straße Müller Bücher Gebäude Überprüfung
            Geschwindigkeit Wörterbuch Suchanfrage Übertragung Zeichenkette Ausführung
            """
        ),
        _words("der die das und ist nicht mit für auf ein eine zu den von im es wir sich"),
        " ",
        ".",
        0.05,
    ),
    Language(
        "es",
        _words(
            """
            configuración función búsqueda índice versión número código página sesión
            conexión año niño región garantía técnica rápido también después método
            análisis cálculo depuración compilación migración caché
            """
        ),
        _words("el la los las de del y que en un una por con para es no se lo"),
        " ",
        ".",
        0.04,
    ),
    Language(
        "ru",
        _words(
            """
            ошибка файл сервер поиск индекс запрос память проверка тест данные сессия ветка
            сборка ещё ёлка журнал настройка клиент таблица строка столбец скорость задача
            развёртывание отладка обновление результат
            """
        ),
        _words("и в не на что с по это как мы для из но то же он она так"),
        " ",
        ".",
        0.05,
    ),
    Language(
        "el",
        _words(
            """
            σφάλμα αρχείο αναζήτηση ευρετήριο διακομιστής μνήμη έλεγχος δεδομένα συνεδρία
            έκδοση ερώτημα απάντηση ρύθμιση πίνακας στήλη ταχύτητα εργασία αποτέλεσμα
            """
        ),
        _words("και το η ο να σε με για από τα της του στο δεν είναι"),
        " ",
        ".",
        0.03,
    ),
    Language(
        "zh",
        _words(
            """
            搜索 索引 数据库 服务器 错误 文件 测试 会话 查询 内存 性能 配置 部署 迁移 分页
            游标 日志 缓存 线程 进程 分词 排序 结果 用户 项目 代码 函数 变量 接口 东京
            """
        ),
        _words("的 了 在 是 和 我们 这个 需要 可以 一下 然后 因为"),
        "",
        "。",
        0.04,
    ),
    Language(
        "ja",
        _words(
            """
            検索 索引 ファイル エラー テスト セッション サーバー データベース 設定 性能 ログ
            キャッシュ メモリ 東京 移行 確認 修正 実装 関数 結果 ユーザー 変更 問題
            """
        ),
        _words("を は が の に で と も から まで です ます した"),
        "",
        "。",
        0.03,
    ),
)

EMOJI = _words("✅ ❌ 🚀 🔥 🐛 ⚠️ 🎉 👍 🤔 📦 🔍 💡 ⏱️ 🧪")

# Folding accents away the simple way (only the accented letters used above), for queries a
# person types without them.
_ACCENT_FOLD = str.maketrans(
    "àâäáãçéèêëíìîïñóòôöõúùûüÿÀÂÄÁÇÉÈÊËÍÎÏÑÓÔÖÚÙÛÜ",
    "aaaaaceeeeiiiinooooouuuuyAAAACEEEEIIINOOOUUUU",
)


def fold_accents(word: str) -> str:
    """``word`` without the Latin accents of the word lists (``résumé`` -> ``resume``)."""
    return word.translate(_ACCENT_FOLD).replace("ß", "ss")


@dataclass(frozen=True, slots=True)
class Query:
    """A benchmark query: its text and where its words came from (``tech`` or a language)."""

    text: str
    words: int
    kind: str


class Vocabulary:
    """The ranked technical vocabulary with Zipf weights, and text built from it."""

    def __init__(self, *, size: int = 30_000, zipf_s: float = 1.07, seed: int = 0) -> None:
        if size < len(TECH_WORDS):
            raise ValueError(f"size must be at least {len(TECH_WORDS)}")
        rng = random.Random(f"vocabulary:{seed}")
        real = list(dict.fromkeys(TECH_WORDS))
        rng.shuffle(real)
        seen = set(real)
        synthetic: list[str] = []
        while len(real) + len(synthetic) < size:
            word = "".join(
                rng.choice(_ONSETS) + rng.choice(_VOWELS) for _ in range(rng.randint(2, 3))
            ) + rng.choice(_CODAS)
            if word not in seen:
                seen.add(word)
                synthetic.append(word)
        self.words: tuple[str, ...] = tuple(real + synthetic)
        self.zipf_s = zipf_s
        self.cum_weights: list[float] = list(
            itertools.accumulate(1.0 / (rank + 2.7) ** zipf_s for rank in range(len(self.words)))
        )
        self.languages = {language.name: language for language in LANGUAGES}
        self._language_cum = list(itertools.accumulate(language.share for language in LANGUAGES))

    def __len__(self) -> int:
        return len(self.words)

    def sample(self, rng: random.Random, k: int) -> list[str]:
        """``k`` words drawn by their Zipf weights (with repetition)."""
        return rng.choices(self.words, cum_weights=self.cum_weights, k=k)

    def band(self, rng: random.Random, k: int, low: int, high: int) -> list[str]:
        """``k`` distinct words with a rank in ``[low, high)``, uniformly."""
        return rng.sample(self.words[low : min(high, len(self.words))], k)

    def share(self, word: str) -> float:
        """The probability of ``word`` in a draw (0 for a word outside the vocabulary)."""
        try:
            rank = self.words.index(word)
        except ValueError:
            return 0.0
        below = self.cum_weights[rank - 1] if rank else 0.0
        return (self.cum_weights[rank] - below) / self.cum_weights[-1]

    def language(self, rng: random.Random) -> Language:
        """A session's language, by the languages' shares."""
        total = self._language_cum[-1]
        index = bisect.bisect(self._language_cum, rng.random() * total)
        return LANGUAGES[min(index, len(LANGUAGES) - 1)]

    def prose(
        self,
        rng: random.Random,
        language: Language,
        n_words: int,
        topic: Sequence[str],
        *,
        emoji: float = 0.0,
    ) -> str:
        """About ``n_words`` words of prose: function words of the language, its content
        words, the technical vocabulary and the session's topic words, in sentences."""
        n_words = max(1, n_words)
        n_glue = n_words * 2 // 5
        n_own = n_words // 10 if language.name != "en" else n_words // 20
        n_topic = max(1, n_words // 7)
        n_tech = max(1, n_words - n_glue - n_own - n_topic)
        words = (
            rng.choices(language.glue, k=n_glue)
            + rng.choices(language.words, k=n_own)
            + rng.choices(topic, k=n_topic)
            + self.sample(rng, n_tech)
        )
        rng.shuffle(words)
        sentences: list[str] = []
        start = 0
        while start < len(words):
            end = start + rng.randint(6, 16)
            chunk = words[start:end]
            if language.cjk:
                # Latin words (code identifiers) keep spaces around them; CJK words do not.
                text = "".join(w if not w.isascii() else f" {w} " for w in chunk).strip()
            else:
                text = " ".join(chunk)
                text = text[:1].upper() + text[1:]
            sentences.append(text + language.full_stop)
            start = end
        text = language.joiner.join(sentences) if language.cjk else " ".join(sentences)
        if emoji and rng.random() < emoji:
            text += " " + rng.choice(EMOJI)
        return text

    def queries(
        self, rng: random.Random, count: int, *, other_scripts: float = 0.15
    ) -> list[Query]:
        """``count`` queries of 1-3 words (40/35/25 %) drawn like the text: technical words by
        their Zipf weights, and a share ``other_scripts`` in a session language (accented Latin
        typed without its accents half of the time, or a CJK word)."""
        others = [language for language in LANGUAGES if language.name != "en"]
        found: list[Query] = []
        for _ in range(count):
            n = rng.choices((1, 2, 3), weights=(40, 35, 25))[0]
            if rng.random() < other_scripts:
                language = rng.choice(others)
                words = rng.sample(language.words, n)
                if not language.cjk and rng.random() < 0.5:
                    words = [fold_accents(word) for word in words]
                found.append(Query(" ".join(words), n, language.name))
            else:
                found.append(Query(" ".join(self.sample(rng, n)), n, "tech"))
        return found
