"""The labelled fixture of theme discovery's quality: `tests/fixtures/themes/paraphrases.jsonl`,
sentences in known paraphrase groups, one JSON object a line: `{"id", "group", "text"}`.

How it is made (no network, no model): each group below is a few hand-written templates of one
note, as a model writes them about an agent's traces along one aspect (`goal`: what the user
wanted; `behaviour`: what the agent did; `outcome`: how the run ended; `sentiment`: how the user
felt). A template's `{slot}`s are filled from the group's alternatives, then the shared ones
(`SHARED`: subjects, verbs, order numbers, optional tails), an alternative may hold slots of its
own, and an empty alternative leaves an optional clause out; `{num}` is a random order
number. So members of a group share most of their wording and differ in synonyms, entities,
word order and length, as notes about one agent from one model do.

Some groups are close to others on purpose: refunds for a duplicate charge, a late delivery and
a damaged item; cancelling, downgrading and upgrading a plan; booking, changing and cancelling
a flight; a refund issued (behaviour and outcome) and one asked for; anger about a double
charge and a refund for it; a user threatening to cancel and one cancelling. Group sizes are
unequal, drawn from 10 to 120.

`python -m bench.intelligence.paraphrases` rewrites the file; one seeded `random.Random`
draws everything, so re-running reproduces it byte for byte (a test checks the two agree).
Notes are shuffled and numbered `p0001`... so neither an id nor the file order gives a
group away.
"""

from __future__ import annotations

import json
import random
import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from bench.harness import REPO_ROOT, repo_relative

__all__ = ["FIXTURE", "GROUPS", "SEED", "Group", "Paraphrase", "generate", "load", "render"]

FIXTURE = REPO_ROOT / "tests" / "fixtures" / "themes" / "paraphrases.jsonl"
SEED = 20261207
MIN_SIZE, MAX_SIZE = 10, 120
_SLOT = re.compile(r"\{(\w+)\}")


@dataclass(frozen=True, slots=True)
class Group:
    """A paraphrase group: its name (`aspect/what`), its templates and its own slots."""

    name: str
    templates: tuple[str, ...]
    slots: Mapping[str, Sequence[str]]


@dataclass(frozen=True, slots=True)
class Paraphrase:
    """One sentence of the fixture and the group it was written for."""

    id: str
    group: str
    text: str


def _group(name: str, *templates: str, **slots: Sequence[str]) -> Group:
    return Group(name, templates, slots)


SHARED: Mapping[str, Sequence[str]] = {
    "user": ("The user", "The user", "The user", "The customer", "The customer", "They"),
    "agent": ("The agent", "The agent", "The agent", "The assistant"),
    "wanted": ("wanted", "wanted", "asked for", "was looking for", "needed", "requested"),
    "wanted_to": ("wanted to", "wanted to", "asked to", "was trying to", "needed to"),
    "order": ("their order", "order {num}", "order #{num}", "their last order"),
    "soon": ("", "", "", " as soon as possible", " today", " before the weekend"),
    "count": ("two", "three", "four", "five", "several", "2", "3"),
    "city": ("Lisbon", "Berlin", "Chicago", "Osaka", "Nairobi", "Toronto", "Madrid", "Denver"),
    "city2": ("Paris", "London", "New York", "Singapore", "Rome", "Boston", "Dublin", "Seoul"),
    "module": (
        "the billing module",
        "the auth service",
        "the CSV parser",
        "the payments client",
        "the scheduler",
        "utils.py",
    ),
    "tool": ("search", "lookup_order", "get_weather", "run_sql", "fetch_url", "calendar"),
}

GROUPS: tuple[Group, ...] = (
    # ---- goal: what the user wanted ----------------------------------------------------------
    _group(
        "goal/refund-duplicate-charge",
        "{user} {wanted} a refund for a {dup}{card}{soon}.",
        "{user} was charged twice for {order} and {wanted} a refund{soon}.",
        "{user} {wanted} their money back after a {dup}{card}.",
        dup=("duplicate charge", "duplicate charge", "double charge", "charge that appeared twice"),
        card=("", "", " on their card", " on their credit card", " on their last invoice"),
    ),
    _group(
        "goal/refund-late-delivery",
        "{user} {wanted} a refund for a late delivery{of}{soon}.",
        "{user} {wanted} a refund because {order} arrived {late}.",
        "{user} {wanted} their money back for an order that arrived {late}.",
        of=("", "", " of {order}"),
        late=("late", "late", "a week late", "days after the promised date", "too late"),
    ),
    _group(
        "goal/refund-damaged-item",
        "{user} {wanted} a refund for a damaged {item}{soon}.",
        "{user} {wanted} a refund because the {item} in {order} arrived {broken}.",
        "{user} {wanted} their money back for a {item} that arrived {broken}.",
        item=("item", "item", "lamp", "phone case", "coffee grinder", "chair"),
        broken=("broken", "damaged", "cracked", "broken in the box"),
    ),
    _group(
        "goal/return-policy",
        "{user} {wanted} to know whether they could still return {thing} after {days} days.",
        "{user} asked about the return policy for {thing} bought {days} days ago.",
        "{user} {wanted_to} find out if {thing} could be returned after {days} days.",
        thing=("an item", "a jacket", "shoes", "an opened item", "a gift"),
        days=("30", "30", "45", "60", "thirty"),
    ),
    _group(
        "goal/cancel-subscription",
        "{user} {wanted_to} cancel their {plan}subscription{soon}.",
        "{user} {wanted} the cancellation of their {plan}subscription{why}.",
        "{user} {wanted_to} cancel the {plan}subscription and stop the monthly charges.",
        plan=("", "", "Pro ", "premium ", "annual "),
        why=("", "", " because they no longer use it", " before the next renewal"),
    ),
    _group(
        "goal/downgrade-plan",
        "{user} {wanted_to} downgrade from the {high} plan to the {low} plan{soon}.",
        "{user} {wanted_to} move their account down to the {low} plan.",
        "{user} {wanted} a downgrade of their {high} plan{why}.",
        high=("Pro", "Pro", "Business", "Team"),
        low=("Free", "Basic", "Starter"),
        why=("", " to save money", " because the team got smaller"),
    ),
    _group(
        "goal/upgrade-plan",
        "{user} {wanted_to} upgrade to the {high} plan{why}.",
        "{user} {wanted_to} move their account up to the {high} plan{soon}.",
        "{user} asked how to upgrade their {low} plan to {high}.",
        high=("Pro", "Pro", "Business", "Enterprise"),
        low=("Free", "Basic", "Starter"),
        why=("", "", " to get more seats", " for the higher API limits"),
    ),
    _group(
        "goal/track-order",
        "{user} {wanted_to} know where {order} was.",
        "{user} asked for the tracking status of {order}.",
        "{user} {wanted} an update on the delivery of {order}{late}.",
        late=("", "", " which had not arrived yet", " which was overdue"),
    ),
    _group(
        "goal/change-shipping-address",
        "{user} {wanted_to} change the shipping address on {order}.",
        "{user} {wanted_to} update the delivery address for {order}{because}.",
        "{user} {wanted} {order} sent to a new address{because}.",
        because=("", "", " because they had moved", " before it shipped"),
        wanted=("wanted", "wanted", "needed"),
    ),
    _group(
        "goal/reset-password",
        "{user} {wanted_to} reset their password{because}.",
        "{user} could not log in and {wanted} a password reset link.",
        "{user} forgot their password and {wanted} help resetting it.",
        because=("", "", " after forgetting it", " because the old one stopped working"),
    ),
    _group(
        "goal/unlock-account",
        "{user} {wanted} their account unlocked after too many failed login attempts.",
        "{user} was locked out of their account and {wanted} it unlocked{soon}.",
        "{user} {wanted_to} get back into an account that was locked after failed logins.",
        wanted=("wanted", "wanted", "needed"),
    ),
    _group(
        "goal/two-factor-setup",
        "{user} {wanted} help setting up two-factor authentication{app}.",
        "{user} {wanted_to} turn on two-factor authentication for their account{app}.",
        "{user} asked how to enable 2FA{app}.",
        app=("", "", " with an authenticator app", " with their phone", " using SMS codes"),
    ),
    _group(
        "goal/update-payment-card",
        "{user} {wanted_to} update the card on file{because}.",
        "{user} {wanted_to} replace the expired credit card on their account.",
        "{user} asked how to change the payment method{because}.",
        because=("", "", " because the old card expired", " before the next invoice"),
    ),
    _group(
        "goal/invoice-copy",
        "{user} {wanted} a copy of their invoice for {month}.",
        "{user} {wanted} the {month} invoice sent again{fmt}.",
        "{user} {wanted_to} download the invoice for {month}{fmt}.",
        month=("March", "April", "last month", "the last quarter", "January"),
        fmt=("", "", " as a PDF", " for their accountant"),
        wanted=("wanted", "wanted", "needed"),
    ),
    _group(
        "goal/book-flight",
        "{user} {wanted_to} book a flight from {city} to {city2}{date}.",
        "{user} {wanted} a one-way flight to {city2}{date}.",
        "{user} {wanted_to} book a return flight from {city} to {city2}{date}.",
        date=("", " next Friday", " on the 14th", " for the first week of May", " tomorrow"),
    ),
    _group(
        "goal/change-flight",
        "{user} {wanted_to} change their flight to {city2} to {newdate}.",
        "{user} {wanted_to} move their {city} to {city2} flight to {newdate}.",
        "{user} {wanted} to rebook their flight to {city2} for {newdate}.",
        newdate=("a later date", "an earlier date", "the next day", "the following week"),
    ),
    _group(
        "goal/cancel-flight",
        "{user} {wanted_to} cancel their flight to {city2} and get a refund.",
        "{user} {wanted_to} cancel the {city} to {city2} flight{why}.",
        "{user} {wanted} a refund for a cancelled flight to {city2}.",
        why=("", " because of illness", " because plans changed"),
    ),
    _group(
        "goal/book-hotel",
        "{user} {wanted_to} book a hotel room in {city} for {count} nights.",
        "{user} {wanted} a hotel in {city}{near} for {count} nights.",
        "{user} {wanted_to} find and book a room in {city}{near}.",
        near=("", "", " near the station", " close to the conference centre"),
    ),
    _group(
        "goal/fix-failing-test",
        "{user} {wanted} the agent to fix a failing test in {module}.",
        "{user} {wanted_to} get the failing {test} in {module} to pass.",
        "{user} asked the agent to fix the broken {test} in {module}{ci}.",
        test=("test", "test", "unit test", "integration test"),
        ci=("", "", " that fails in CI", " after the last merge"),
        wanted=("wanted", "wanted", "needed"),
    ),
    _group(
        "goal/write-unit-tests",
        "{user} {wanted} unit tests written for {module}.",
        "{user} asked the agent to write unit tests for {module}{cover}.",
        "{user} {wanted} more test coverage for {module}{cover}.",
        cover=("", "", " covering the edge cases", " with pytest"),
        wanted=("wanted", "wanted", "needed"),
    ),
    _group(
        "goal/explain-error",
        "{user} {wanted} an explanation of a {error} in {module}.",
        "{user} asked what the {error} from {module} meant.",
        "{user} {wanted_to} understand why {module} raised a {error}.",
        error=(
            "KeyError",
            "TypeError",
            "timeout error",
            "segmentation fault",
            "NullPointerException",
        ),
    ),
    _group(
        "goal/refactor-code",
        "{user} {wanted} {module} refactored {to}.",
        "{user} asked the agent to refactor {module} {to}.",
        to=(
            "into smaller functions",
            "to remove duplication",
            "to use async IO",
            "for readability",
        ),
        wanted=("wanted", "wanted", "needed"),
    ),
    _group(
        "goal/sql-query",
        "{user} {wanted} a SQL query that {does}.",
        "{user} asked for help writing a SQL query to {do}.",
        does=(
            "counts orders per customer",
            "finds duplicate emails",
            "joins users and orders by month",
            "returns the top ten products by revenue",
        ),
        do=(
            "count orders per customer",
            "find duplicate emails",
            "join users and orders by month",
            "return the top ten products by revenue",
        ),
    ),
    _group(
        "goal/summarise-document",
        "{user} {wanted} a summary of {doc}{length}.",
        "{user} asked the agent to summarise {doc}{length}.",
        doc=(
            "a long PDF report",
            "the meeting notes",
            "a research paper",
            "the quarterly earnings call",
            "a contract",
        ),
        length=("", "", " in three bullet points", " in one paragraph", " for an executive"),
    ),
    _group(
        "goal/translate-text",
        "{user} {wanted} {text} translated into {language}.",
        "{user} asked for a {language} translation of {text}.",
        text=("a paragraph", "their product description", "an email", "a short letter"),
        language=("French", "German", "Spanish", "Japanese", "Portuguese"),
        wanted=("wanted", "wanted", "needed"),
    ),
    _group(
        "goal/weather-forecast",
        "{user} asked about the weather in {city}{when}.",
        "{user} {wanted} the weather forecast for {city}{when}.",
        "{user} {wanted_to} know if it would rain in {city}{when}.",
        when=("", " tomorrow", " this weekend", " next week"),
    ),
    _group(
        "goal/recipe",
        "{user} {wanted} a recipe for {dish}{diet}.",
        "{user} asked how to cook {dish}{diet}.",
        dish=("lasagne", "banana bread", "a vegetable curry", "pancakes", "chicken soup"),
        diet=("", "", " without gluten", " for four people", " that is vegan"),
    ),
    # ---- behaviour: what the agent did -------------------------------------------------------
    _group(
        "behaviour/looked-up-order-and-refunded",
        "{agent} looked up {order} and issued a refund{tool}.",
        "{agent} checked {order} with the lookup tool and then issued the refund.",
        "{agent} found {order} and refunded it{tool}.",
        tool=("", "", " through the payments tool", " without asking for confirmation"),
    ),
    _group(
        "behaviour/escalated-to-human",
        "{agent} escalated the conversation to a human agent{because}.",
        "{agent} handed the conversation over to a human{because}.",
        "{agent} transferred the user to a human support agent{because}.",
        because=("", "", " after failing to resolve it", " when the user asked for a person"),
    ),
    _group(
        "behaviour/asked-clarifying-question",
        "{agent} asked a clarifying question before answering.",
        "{agent} asked the user to clarify {what} before {doing}.",
        "{agent} asked {count} clarifying questions before {doing}.",
        what=("what they meant", "the request", "which account they meant"),
        doing=("answering", "acting", "calling any tool"),
    ),
    _group(
        "behaviour/repeated-tool-call",
        "{agent} called the {tool} tool {count} times with the same arguments.",
        "{agent} repeated the same {tool} call {count} times.",
        "{agent} kept calling {tool} with identical arguments{loop}.",
        loop=("", " in a loop", " without using the results"),
    ),
    _group(
        "behaviour/retried-after-tool-error",
        "{agent} retried the {tool} call after it returned an error.",
        "{agent} retried {tool} {count} times after {error}.",
        "After the {tool} tool failed, {agent_lc} retried it{backoff}.",
        error=("an error", "a timeout", "a 500 response", "a rate limit error"),
        agent_lc=("the agent", "the agent", "the assistant"),
        backoff=("", " with a backoff", " and it worked the second time"),
    ),
    _group(
        "behaviour/invented-policy",
        "{agent} quoted a {policy} policy that does not exist.",
        "{agent} made up a {policy} policy{detail}.",
        "{agent} cited a {policy} rule that is not in the knowledge base.",
        policy=("refund", "return", "shipping", "cancellation"),
        detail=("", "", " with a 90 day window", " that contradicts the real one"),
    ),
    _group(
        "behaviour/ignored-instruction",
        "{agent} ignored the user's instruction to {instr}.",
        "{agent} did not follow the instruction to {instr}.",
        "The user asked {agent_lc} to {instr} but it did not.",
        instr=(
            "keep the answer short",
            "answer in French",
            "not change the tests",
            "use only the provided data",
        ),
        agent_lc=("the agent", "the agent", "the assistant"),
    ),
    _group(
        "behaviour/searched-knowledge-base",
        "{agent} searched the knowledge base for {topic} and quoted the relevant article.",
        "{agent} looked up {topic} in the knowledge base before answering.",
        "{agent} found the help article about {topic} and linked it.",
        topic=("the refund policy", "shipping times", "password rules", "the API limits"),
    ),
    _group(
        "behaviour/ran-tests",
        "{agent} ran the test suite{after} and reported {count} failures.",
        "{agent} ran the tests{after} and summarised the failures.",
        "{agent} ran pytest on {module}{after}.",
        after=("", "", " after its edit", " before making any change"),
    ),
    _group(
        "behaviour/edited-without-tests",
        "{agent} edited {count} files in {module} without running the tests.",
        "{agent} changed {module} and never ran the tests.",
        "{agent} made edits to {module} but skipped running the test suite.",
    ),
    _group(
        "behaviour/gave-up-early",
        "{agent} gave up after the first search returned nothing.",
        "{agent} stopped trying after one {tool} call came back empty.",
        "{agent} gave up {soon_lc}and told the user it could not help.",
        soon_lc=("", "quickly ", "after one attempt "),
    ),
    _group(
        "behaviour/asked-for-order-number",
        "{agent} asked the user for their order number{before}.",
        "{agent} asked for the order number{before}.",
        "{agent} requested the order ID from the user{before}.",
        before=("", "", " before looking anything up", " first"),
    ),
    _group(
        "behaviour/verified-identity",
        "{agent} verified the user's identity by asking for {factor}.",
        "{agent} checked who the user was by asking for {factor}{before}.",
        "{agent} asked for {factor} to verify the user's identity{before}.",
        factor=("their email address", "the last four digits of the card", "a one-time code"),
        before=("", "", " before making any change"),
    ),
    _group(
        "behaviour/cited-sources",
        "{agent} answered with citations to {count} sources.",
        "{agent} cited {count} sources in its answer{links}.",
        "{agent} backed its answer with {count} cited sources{links}.",
        links=("", "", " with links", " from the documentation"),
    ),
    _group(
        "behaviour/switched-language",
        "{agent} switched to {language} to match the user.",
        "{agent} replied in {language} because the user wrote in {language}.",
        "{agent} answered in {language}, the user's language.",
        language=("Spanish", "German", "French", "Italian"),
    ),
    _group(
        "behaviour/long-reasoning",
        "{agent} spent a long time reasoning before its first tool call.",
        "{agent} reasoned for {count} minutes before doing anything.",
        "{agent} thought at length before calling any tool{note}.",
        note=("", "", " which slowed the run down"),
    ),
    # ---- outcome: how the run ended ----------------------------------------------------------
    _group(
        "outcome/refund-issued",
        "The refund was issued and the user confirmed {receipt}.",
        "The refund was issued{amount} and the conversation closed.",
        "The run ended with the refund issued{amount}.",
        receipt=("receipt", "it", "they saw it"),
        amount=("", "", " for the full amount", " to the original card"),
    ),
    _group(
        "outcome/resolved",
        "The issue was resolved and the user thanked the agent.",
        "The problem was solved{quick} and the user was satisfied.",
        "The conversation ended with the issue resolved{quick}.",
        quick=("", "", " quickly", " on the first try"),
    ),
    _group(
        "outcome/handoff-unresolved",
        "The conversation ended with a handoff to a human without a resolution.",
        "The run ended unresolved with a handoff to human support.",
        "The issue was not resolved and was handed off to a human{queue}.",
        queue=("", "", " in the support queue", " for follow up"),
    ),
    _group(
        "outcome/tool-timeout",
        "The run timed out after {secs} seconds while waiting for the {tool} tool.",
        "The run ended with a timeout from the {tool} tool.",
        "The {tool} call timed out and the run stopped{secs_tail}.",
        secs=("30", "60", "120", "300"),
        secs_tail=("", "", " after a minute"),
    ),
    _group(
        "outcome/api-error",
        "The run ended with a {code} error from the {service} API.",
        "The run failed because the {service} API returned {code}.",
        "A {code} from the {service} API ended the run.",
        code=("500", "502", "503", "401", "429"),
        service=("payments", "shipping", "search", "calendar"),
    ),
    _group(
        "outcome/user-abandoned",
        "The user left the conversation before the agent answered.",
        "The user stopped replying{when} and the conversation was abandoned.",
        "The user abandoned the conversation{when}.",
        when=("", "", " halfway through", " after the second question"),
    ),
    _group(
        "outcome/booking-confirmed",
        "The booking was confirmed and a confirmation email was sent.",
        "The {what} was booked and the user got a confirmation{email}.",
        "The run ended with a confirmed {what} booking{email}.",
        what=("flight", "hotel", "room", "table"),
        email=("", "", " by email", " number"),
    ),
    _group(
        "outcome/booking-failed",
        "The booking failed because {reason}.",
        "The {what} could not be booked because {reason}.",
        "The run ended without a booking: {reason}.",
        what=("flight", "hotel", "room"),
        reason=(
            "the payment was declined",
            "there was no availability",
            "the dates were invalid",
            "the fare had changed",
        ),
    ),
    _group(
        "outcome/tests-pass",
        "All tests passed after the fix.",
        "All {count} tests passed at the end of the run.",
        "The fix worked and the whole test suite passed{ci}.",
        ci=("", "", " in CI", " locally"),
    ),
    _group(
        "outcome/tests-still-failing",
        "{count} tests were still failing at the end of the run.",
        "The run ended with {count} failing tests.",
        "The fix did not work and the tests still failed{ci}.",
        ci=("", "", " in CI", " locally"),
    ),
    _group(
        "outcome/pull-request-opened",
        "{agent} opened a pull request with the change.",
        "The run ended with a pull request{target}.",
        "A pull request{target} was opened for review.",
        target=("", "", " for the fix", " against main"),
    ),
    _group(
        "outcome/wrong-answer",
        "The answer was wrong: {detail}.",
        "The final answer was incorrect because {detail}.",
        "The agent gave a wrong answer; {detail}.",
        detail=(
            "the total was miscalculated",
            "it named the wrong city",
            "the date was off by a year",
            "the price was out of date",
        ),
    ),
    _group(
        "outcome/partial-answer",
        "The agent answered only part of the question.",
        "The answer covered only {part} of the {count} questions.",
        "The run ended with a partial answer{missing}.",
        part=("one", "two", "the first"),
        missing=("", "", " that left out the second question", " and no follow up"),
    ),
    _group(
        "outcome/turn-limit",
        "The run stopped after reaching the limit of {turns} turns.",
        "The run hit the {turns} turn limit before finishing.",
        "The agent ran out of turns after {turns} steps{task}.",
        turns=("20", "25", "50", "100"),
        task=("", "", " with the task unfinished"),
    ),
    _group(
        "outcome/reset-link-sent",
        "A password reset link was sent to the user's email.",
        "The run ended with a reset link sent to {where}.",
        "The user received a password reset email{soon}.",
        where=("the user's email", "their inbox", "the address on file"),
    ),
    # ---- sentiment: how the user felt --------------------------------------------------------
    _group(
        "sentiment/frustrated-repeating",
        "The user was frustrated at having to repeat their {info}.",
        "The user got frustrated after repeating their {info} {count} times.",
        "The user was annoyed that they had to give their {info} again.",
        info=("order number", "question", "email address", "account details"),
    ),
    _group(
        "sentiment/frustrated-slow",
        "The user was frustrated by how slow the agent was.",
        "The user was frustrated by the slow {what}.",
        "The user complained that the agent took too long{to}.",
        what=("answers", "responses", "replies"),
        to=("", "", " to answer", " to find the order"),
    ),
    _group(
        "sentiment/happy-quick",
        "The user was happy with the quick {what}.",
        "The user was pleased with how fast the {what} came.",
        "The user seemed satisfied with the quick {what}.",
        what=("resolution", "answer", "fix", "reply"),
    ),
    _group(
        "sentiment/grateful",
        "The user thanked the agent {count} times.",
        "The user was very grateful and thanked the agent{warm}.",
        "The user expressed thanks{warm}.",
        warm=("", "", " warmly", " at the end", " repeatedly"),
    ),
    _group(
        "sentiment/angry-double-charge",
        "The user was angry about being charged twice.",
        "The user was angry about the {dup}{card}.",
        "The user was upset and angry that they had been charged twice{card}.",
        dup=("duplicate charge", "double charge"),
        card=("", "", " on their card"),
    ),
    _group(
        "sentiment/confused",
        "The user seemed confused by the agent's {what}.",
        "The user was confused by the {what} and asked again.",
        "The user did not understand the agent's {what}.",
        what=("instructions", "answer", "explanation", "steps"),
    ),
    _group(
        "sentiment/neutral",
        "The user's tone was neutral throughout.",
        "The user stayed neutral{manner}.",
        "The user's tone was flat and neutral{manner}.",
        manner=("", "", " and matter of fact", " and businesslike"),
    ),
    _group(
        "sentiment/sarcastic",
        "The user was sarcastic about the agent's earlier mistakes.",
        "The user made sarcastic remarks about {what}.",
        "The user responded sarcastically to {what}.",
        what=("the agent's mistakes", "the wrong answer", "the repeated apology"),
    ),
    _group(
        "sentiment/threatened-to-cancel",
        "The user threatened to cancel their subscription if {cond}.",
        "The user said they would cancel their subscription unless {cond}.",
        "The user threatened to cancel{cond_tail}.",
        cond=(
            "the issue was not fixed",
            "they did not get a refund",
            "it happened again",
        ),
        cond_tail=("", " their account", " and leave for a competitor"),
    ),
    _group(
        "sentiment/polite-but-impatient",
        "The user stayed polite but grew impatient{over}.",
        "The user was polite at first but became impatient{over}.",
        "The user remained courteous while getting impatient{over}.",
        over=("", "", " as the conversation went on", " after the third reply"),
    ),
)


def _fill(text: str, slots: Mapping[str, Sequence[str]], rng: random.Random) -> str:
    def one(match: re.Match[str]) -> str:
        name = match.group(1)
        if name == "num":
            return str(rng.randint(10_000, 99_999))
        choices = slots.get(name) or SHARED[name]
        return _fill(rng.choice(choices), slots, rng)

    return _SLOT.sub(one, text)


def generate(seed: int = SEED) -> list[Paraphrase]:
    """Every sentence of the fixture: each group's size drawn from MIN_SIZE to MAX_SIZE (more
    small groups than large), its members from its templates, then all shuffled and numbered."""
    rng = random.Random(seed)
    drawn: list[tuple[str, str]] = []
    for group in GROUPS:
        size = MIN_SIZE + int((MAX_SIZE - MIN_SIZE + 1) * rng.random() ** 2)
        for _ in range(size):
            template = rng.choice(group.templates)
            text = _fill(template, group.slots, rng)
            drawn.append((group.name, text[0].upper() + text[1:]))
    rng.shuffle(drawn)
    return [Paraphrase(f"p{n:04d}", group, text) for n, (group, text) in enumerate(drawn, start=1)]


def render(paraphrases: Sequence[Paraphrase]) -> str:
    """The fixture file's text: one JSON object a line."""
    return "".join(
        json.dumps({"id": p.id, "group": p.group, "text": p.text}, ensure_ascii=False) + "\n"
        for p in paraphrases
    )


def load(path: Path = FIXTURE) -> list[Paraphrase]:
    """The sentences of a fixture file."""
    with path.open(encoding="utf-8") as lines:
        return [Paraphrase(**json.loads(line)) for line in lines]


def main() -> int:
    FIXTURE.parent.mkdir(parents=True, exist_ok=True)
    made = generate()
    FIXTURE.write_text(render(made), encoding="utf-8")
    print(f"wrote {repo_relative(FIXTURE)}: {len(made)} sentences in {len(GROUPS)} groups")
    return 0


if __name__ == "__main__":
    sys.exit(main())
