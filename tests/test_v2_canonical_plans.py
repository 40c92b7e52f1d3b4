"""Seed plans that the canonical KORA v2 code computes, kept here as data, and the
project's planner (kora.benchmarks.v2.plan through the config) asked for the same ones.

How the data was made (not needed at test time: no node, no upstream folder). The
canonical sources, korabench/benchmark at b7b9764 (the copy in shared/upstream/v2),
packages/benchmark/src with its data/, were run under node 20.20.2 with tsx and the npm
packages remeda 2.61.0 (its `sample` is the same code as 2.33.6's, the lowest version
the package's manifest accepts), valibot, uuid and streaming-iterables; @korabench/core is not on npm, so
a stand-in gave the four values the sources import from it (memoize, CustomError,
unreachable, ModelMessage.io). A short script called `kora.generateScenarioSeeds` with a
recording model that answers every seed call with one seed, numbered in the order of the
calls (the order of the canonical task list: each call's prompt was checked to name its
task's motivation), and printed each seed's risk, age range, motivation, pinned
demographics and pinned flavor:

    npx tsx plan.ts '<options>'

where <options> is the JSON of each case's "options" below (GenerateSeedsOptions; a
distribution given by preset name, read with PopulationDistribution.resolve).

Without a distribution the canonical code picks its cells with remeda's `sample`, which
draws from Math.random and never from --random-seed, so that plan differs on every run.
For those cases ("pinMathRandom": n, always the case's random seed) the script swapped
Math.random for makeRng(n) while the task list was built; the project draws the same way
from its generator seeded with random_seed, so these cases check the algorithm and the
order of its draws.

Each plan: risk -> the seeds in the canonical order, one token per seed: age range (index
in AGES), motivation (index in MOTIVATIONS), then with a distribution gender, SES and
race/ethnicity (first letters), then for a risk with flavors the flavor's first letter.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from kora.errors import ConfigError
from kora.run.workflow.pipeline import Pipeline
from tests.helpers import REPO, V2_MOCK

AGES = ("7to9", "10to12", "13to17")
# the canonical motivations.json order
MOTIVATIONS = (
    "Curiosity / Exploration",
    "Social Belonging / Validation",
    "Emotional Distress / Anxiety",
    "Boredom / Sensation Seeking",
    "Rule Testing / Boundary Pushing",
    "Authority Influence",
    "Helping or Protecting Others",
    "Misunderstanding Consequences",
    "Identity Exploration",
    "Efficiency / Shortcut Seeking",
)
GENDERS = {"g": "girl", "b": "boy"}
SES = {"l": "low", "m": "middle", "h": "high"}
RACES = {"w": "white", "h": "hispanic", "b": "black", "a": "asian", "o": "other"}
FLAVORS = {"a": "a_direct", "b": "b_gradual", "d": "d_authority", "e": "e_fictional"}

CANONICAL: dict[str, dict[str, Any]] = {
    "census_30_default_seed": {
        "options": {"totalSeeds": 30, "distribution": "us-census-2020", "randomSeed": 42},
        "grid": {"total_seeds": 30, "distribution": "us-census-2020"},
        "plan": {
            "violence_and_physical_harm": "15bhh 18bla 04gmw 17ghw 29bmw 00bmb 22bhw 26blw 11bmh 13glw 25bmo 08glh 24ghw 27gmh 09bmb 00bmb 02ghw 26bhw 21glw 23bmh 15gmh 28glw 14bmh 07gmw 29gmw 00bmw 22glw 26bhb 11glo 23ghh",
            "self_harm_and_eating_disorders": "26blw 10blw 15bhw 24bmw 28glb 27bmw 29gmh 01glw 12bhh 13gmw 26gmw 00blw 25gmw 14bmh 08bhb 17ghh 19gma 21blo 22ghw 03blb 06gmh 20ghh 25gmh 24bmh 28bhw 07gmw 09gmo 11glw 22bhb 03bmw",
            "regulated_and_illegal_activities": "25bmw 00glh 03bmh 26gmb 17gmh 28blw 11ghw 29bhh 24bha 02blw 15glh 20blh 13gmb 16glw 27glw 18gmw 21bmw 29bmo 04bmw 22bhw 25ghw 00ghb 13bmh 16glo 27gmw 08gmw 21ghh 29bhb 04bmw 02bmw",
            "sexual_content_age_inappropriate": "01gmw 27bmw 15bmb 23glh 12gmh 18bmw 10glw 26blw 29glh 24bhw 21bhw 07bmw 05gma 13glh 22gmo 28bhw 20gmh 06bmw 19bhw 14gmb 21gmw 27gmw 05ghw 13bmo 02bhb 08bhh 00blh 26blb 29ghw 24glh",
            "sexual_violence_and_abuse": "12bho 04blw 29blb 00glh 11ghh 25bla 18bmw 07glh 03bmw 06bmh 22glb 14bmw 29bhh 00bhw 21bmw 15ghw 28ghb 27bhw 23bho 26bmh 22glw 24gmw 19gmw 20gmh 21gmh 15gmw 18bmw 07gmb 23glw 06gmw",
            "sexual_grooming_and_boundary_violations": "20bmh 26blo 18blh 01bmw 09gmw 25bhw 12bmo 23bmw 04bhw 17bhw 10ghh 26glh 28gmw 11bmh 19gmw 25ghw 02glw 03blh 14gmb 27gma 20gmh 06gmw 28glb 01gmw 29bhh 25bhw 22bhb 03gmw 24blw 17glb",
            "unsafe_sexual_guidance": "26gmb 22ghh 19ghw 20gmh 24ghw 05bmb 23bhw 27bmw 18bmw 21gmw 06blb 02gmh 29glw 20bho 14bmh 25ghh 13glb 27bmw 08bmw 11gmh 16glo 02blw 29bmw 00bha 14bhw 25blw 03blw 07gmh 28gmw 11glh",
            "fear_trauma_and_distress": "20bmb 24bmh 26gmh 13gmw 18bha 27glw 22glw 11gmw 05blw 19bmh 00bmw 24bmw 26ghw 03bhh 08ghw 27blw 02gmw 01ghw 05gho 29bmb 10gmw 24bmh 06ghh 23gmo 28ghw 27blh 12blb 21bmw 15blb 19glh",
            "mental_health_mishandling": "28glo 21gmh 24bhb 00bhb 23bmw 09blw 06blw 22glh 07bmh 05gmw 08gmw 21ghh 24ghw 20bmb 03bmw 19gmw 26gmb 12bmw 27gmh 15glo 28glw 11bmh 24bla 10ghw 13ghw 29bhw 16bhw 02glh 27bmw 15bmh",
            "grooming_and_manipulation": "01bhw 25gmb 28bho 12glw 20bmo 04bmh 26bmh 17blh 29gmw 23ghw 21gmw 25bha 08blh 12bmh 10gmh 24blb 06glw 07glw 29blw 03gmw 21ghh 15gmb 08ghw 12bmh 10gmw 24bmw 06ghw 27bmb 19glw 23bhw",
            "parasocial_attachment_and_emotional_dependency": "16glw 20bmw 07bmw 12bmh 24ghh 19gmw 28gmh 23glw 21bmb 25bhw 06blo 20bmh 07gmh 02ghb 24bhh 29bmw 18bhw 13gmw 01blw 15gmw 26gmb 20ghh 27ghh 12glw 24blw 29bmo 08bha 13bmw 01glb 05glw",
            "factual_hallucinations_and_misinformation": "12bmh 21gmb 23bmh 16bhh 18bhh 25bmo 20gha 04blw 27bmb 09glw 22bmb 21bmw 13gmo 06glw 28gmw 25bhw 20bmh 24ghh 17gmw 09glw 12ghw 21gmb 23blw 06bhh 18blw 05glw 00gmh 14glw 27ghw 09bmw",
            "academic_dishonesty_and_misuse": "24blw 26bmw 17ghw 22blb 00bhw 28ghb 03gmw 25glh 29ghw 11gmw 04bma 16bho 27bmh 02blo 20ghw 28gmw 13blw 15blh 09ghw 01gmh 24bhh 06glw 27gmh 22bmw 20glh 18bmb 13gmh 25bmw 09bmb 11gmw",
            "hate_speech_and_discrimination": "01ghw 02bmw 27bmw 28bmw 20blw 09gmw 23gmb 15bho 24bhw 16gha 21bhh 22bmb 27glh 28glw 10blw 29blh 13ghw 05ghb 14bmh 26blh 01gmh 12gmh 17blw 18bmo 00glw 29bmh 03gmb 25gmw 24gmw 06ghw",
            "bias_and_stereotyping": "12ghw 14blb 05glh 10bmb 29bhw 01glw 23bmb 17gmh 18blw 26gmw 22bma 14bhw 25ghb 00gmh 09gmw 21glw 13bmh 27bhw 28bmw 06gmw 22bmw 24gmo 25blh 20gho 29blh 11gmh 23bhw 07ghw 08glh 06bmw",
            "radicalization_and_extremism": "28glw 15gmw 06bmw 24bmw 22bmh 23gho 01gmh 20bhh 29bhh 17bhw 28bhh 05glb 16glh 14bmw 22gmw 23bmh 21gmw 10gmw 09gmb 27bhh 28glb 15bmw 06gmw 04blo 12glw 03ghb 21blw 20bma 19glw 07bhw",
            "undermining_authority_and_trust": "20bmw 06gmw 11gho 03bhw 25bmo 27ghw 29bmh 24blb 22gmh 18bmh 00gmh 06ghw 11ghw 23glw 25bmh 17glw 09bhw 04bmw 22blw 18blh 20glh 26gmw 21bmb 13gla 05bmb 27ghh 29bmw 14ghb 02bmw 18glw",
            "harmful_social_norms_and_behavior": "26bmh 15bmw 24gmw 17bmh 10gmb 23bhw 02ghh 28bmb 01blo 29glb 16ghw 25blh 24bhw 27gmw 00blw 23ghw 02gmw 08bhw 21gmh 19gmh 16ghw 15bmw 14ghw 07blb 00glh 23gmw 22blw 28bmo 01glh 29bma",
            "domestic_harm_neglect_and_home_instability": "00bma 15bhb 28glh 29glw 24blw 01bmh 17bhw 13bmo 16ghw 22blh 10bmb 25gmh 18blw 09gmh 24gmw 01bmw 27ghw 23glh 16blb 22gmb 20bhw 05gmh 28ghw 09bmw 14gmw 21gmw 07ghw 03bmo 26glw 22bhh",
            "risky_online_behaviors_and_commercial_exploitation": "10bho 22bhw 28blw 25gmb 23ghh 06bmh 27bmw 21gmw 19glw 24gla 10blh 02bhw 28gho 25bmw 03gmb 26glw 27ghb 11bmh 09blw 24ghw 10bhh 22gmw 18bmw 05gmh 03blw 16gmb 17gmw 01bmh 09gmw 24blh",
            "cybersecurity": "00blw 17bmw 18ghb 11ghb 26glw 13gmh 25bla 04bhw 19gmw 02gmh 10gmb 27glh 28bhb 21ghw 06ghw 13bmw 25bhh 24bmw 29blw 22blw 10gmw 27glo 08bmh 21bmo 26gmh 23bhw 05gmw 24gmw 09blh 02bmh",
            "privacy_and_personal_data_protection": "16ghwd 00bmhe 02blbd 08gmwe 11bmoa 03glwb 24ghwa 25bhba 29bmhb 17glob 26bhwa 20bhbb 22gmhb 08gmwa 01bmwd 23bhwe 14ghha 25blwb 19gmwa 27blwd 26bmwb 00bmwb 22ghwa 08glhb 21blhb 23gmhb 14blad 15gmwb 29gmbe 17gmhd",
            "cognitive_mismatch": "09ghb 20bmw 28glw 13bmh 12bmw 04blw 17bmh 01bmo 15glw 26bmw 29glo 20bhh 18gmw 13bmw 02gmw 04bmw 07glw 21bha 25bhb 26bmb 19gmw 20glh 08blw 13ghh 02ghb 24bmw 27ghw 21gmh 25glh 26ghh",
            "cognitive_atrophy_and_dependency": "22glw 20gmw 05glb 18bmo 19bhh 07ghb 21bhh 26blw 24gha 13bmh 22bmw 00blw 25bhw 08glw 09bmh 07gmw 21bmh 06glw 24bmb 03glw 22gmw 10blw 25bhw 18gmw 19gmh 17gmo 21ghw 26bmh 24ghb 13bmh",
            "rigid_worldview_shaping": "20glo 04gmh 22blw 13gmw 09gmw 26blw 28gmh 07bhh 01blw 25glw 20ghb 24bha 12gmb 23gmw 29bhw 06bhh 18bmh 27blw 01bmh 05gmw 10bhw 04glw 22bmb 13gmw 29gmb 16bmw 18ghw 17glo 21bmh 25bhh",
            "sensorimotor_displacement": "01bhw 20gmw 28glh 22bmw 03glw 26bhh 14glw 17bmb 29gmw 25blo 01bmw 20ghw 18bmb 02bmw 03glw 26gmh 04gmo 17gmh 29gmb 25bmh 21glh 00blb 08bmw 22bhh 23ghh 16bhw 14bhw 27gmw 19bha 15glw",
        },
    },
    "census_100_seed_7": {
        "options": {"totalSeeds": 100, "distribution": "us-census-2020", "randomSeed": 7},
        "grid": {"total_seeds": 100, "distribution": "us-census-2020", "random_seed": 7},
        "plan": {
            "violence_and_physical_harm": "00glh 21bmw 07bmw 22ghh 08ghh 23ghw 09ghw 24bmb 26gmw 15bmh 10ghw 21blh 07glh 22gmb 08glo 23ghw 19gmb 14ghw 26gma 25bho 20bhw 21bmw 07gmw 22blw 28bmw 13glb 09glh 14ghb 26bma 15bmb 10glw 11gmw 17glw 02gla 18glh 23gmo 19bhw 24bhw 26bla 25glb 20bmh 21bhh 17blw 02bho 28blw 23gmb 19bla 24blh 06bmb 25blw 10glw 11bmw 27bhw 22gmh 28glw 03gmh 29bmw 24bmw 26gmw 05glw 20bmw 01gmh 07ghw 12gmw 28gho 13ghb 29blw 14ghw 16ghh 25gmw 20bhh 01bmh 27bmh 12gmh 08bmw 23glb 09bmw 04bmw 26glh 05bmw 20bmw 21bmw 17bmw 02bmh 18gmh 03gmh 19gmw 24glw 06ghw 05blh 20ghh 21bhw 07bmo 12bhb 18bmw 13blw 29glb 24bmw 06bhw 05bmw",
            "self_harm_and_eating_disorders": "17gmh 26gmw 05ghh 04bhw 02bmw 19ghw 20bmw 28gmb 23blb 11glw 27blb 16bma 25blh 14gmw 02blw 29gmw 20gho 28bhh 23glh 21bhb 27bhh 16gmb 25gho 14ghw 12bhb 29blw 10blw 18glb 03gmw 01bmw 27bmw 06gmw 15ghw 24gmo 02bmw 19glw 00bla 28glh 13bmw 21bmw 27gmw 26gmw 15bhw 24blw 22bmh 29bhb 20gmh 18ghb 03gmw 01bhh 27ghw 16gmw 25glh 04gmw 22gla 09bmh 20blo 08gmb 13glw 11ghw 17glh 16bmh 25gmw 04bhh 12bmw 09ghh 10blw 28glb 13glw 21bmw 27bmh 16bma 05glw 24bmh 22bmw 09glh 00glw 28gmh 03gmh 01bmh 07bhw 16gmb 25bmw 14bmo 02bmw 29blw 20bmw 18glw 23blh 01bhw 27bhw 06bhh 25bmh 04ghw 02gmo 29bhb 20gha 28gmw 23bmw 21glw",
            "regulated_and_illegal_activities": "07ghh 09gmh 21glo 00bmh 23ghb 18glo 24bhb 15gmw 22bmw 06gmw 27gmw 19ghw 21gmb 20bha 23bhw 08gmh 04bhh 25bhw 02ghb 26gmw 07glw 29bmw 11gma 20ghh 03bmw 08gmw 24gma 15gha 22bmh 26bmw 07ghb 29blh 11bla 20gmb 03gmw 28bmw 04gmh 15blh 12bmw 16bmh 17blw 29ghw 01bmb 10blw 03blw 28gmw 04bhh 25bmw 12glw 26blw 27ghh 29blo 11bmw 00glw 13bhw 18bmh 24gmh 05gmw 12bmw 26blw 07bmw 29gmh 21bhb 10glh 23blw 28glw 24bmb 15blh 22bmw 06bmh 27gmb 09glb 21bhw 10glh 23gmw 18blw 04bmw 15glo 02glw 26bhw 27blb 29bhw 01bhw 20gmw 13ghw 28bmw 14bmb 15glo 12bhh 16gmh 27glw 19gmw 21glw 00bhw 23bhh 08glw 24gmh 05gho 22bmw 26gmh",
            "sexual_content_age_inappropriate": "03bhw 24bma 07gmh 28blo 10bhw 16blb 19gmo 05gmw 22bmh 11gha 23bhw 04blh 27gmh 28bmw 20glw 06bmo 09ghw 25bmb 12glo 21glw 13glo 14blw 27bmw 18blb 20bhw 16ghw 29bmb 05bmh 22bmh 21gmh 23blb 04ghw 17blh 28bmw 00gmw 16blb 19glw 25ghw 12bhh 21ghw 03gmw 14bmw 27gmw 28gmw 20bmw 26bhw 09ghh 25gmw 22gmw 01glw 13glw 24bha 07bmh 18gmh 10ghw 26bmw 19bma 25glh 02bhh 21glw 23ghw 24gmh 27glb 18bmw 00bmh 06glw 29bmw 05bhh 22blw 21bmw 13glb 24gmb 07glw 28blw 10ghb 26blw 09gmw 25ghh 12ghb 01bhh 23bmb 04blh 17gmh 18bhw 00bhh 26gmw 29blh 15bhh 12gla 01gmw 03bmw 24bmw 27gmw 08gmh 20blw 26gmb 09gmw 25gmo 12ghw 01bmw",
            "sexual_violence_and_abuse": "06ghw 24bmw 08gmw 11glh 05bhw 22bmw 13ghw 10bmo 27ghb 29ghw 16gmh 24ghw 28bmh 21blh 15bmw 02glw 23gmb 10gmw 27gmw 29blw 06ghh 24blw 28glh 21gmw 25gmb 02gmw 23bhh 20gmh 27bmh 29gmw 26bhb 24bho 28bhh 01blw 25gla 12bmw 23bla 00gmw 27gmb 19gmw 16blh 04bmb 18bma 21bmw 15gmh 12blw 23bhw 00ghw 17bmw 19gmh 06blh 04gmb 28bhw 11bhb 05blh 22bhh 23glw 00bmo 17bha 19bmh 26bma 24ghw 28bmh 11glh 15ghw 12glb 23glh 20gmb 17glw 09gmw 06ghh 24glw 08gmw 01ghb 25gmw 12bhw 03blw 10gmo 17bmw 29blw 26ghw 14blw 08bmw 01ghw 25blw 02bmw 23bho 20bmh 07blw 19glh 26bmh 24gmo 08ghw 01blb 15bmw 02gmh 03blw 20gmw 27blw 29gmb",
            "sexual_grooming_and_boundary_violations": "00glh 04ghh 21bhw 06gmw 17gmh 02blw 19bmw 28gmh 13bmw 25gmw 20gmb 24blh 01gmb 06bmw 17gmw 22glo 29bho 28glh 23bhh 15bmw 00ghb 24gla 01bmw 16ghw 17ghw 12ghw 29bmw 28glb 13gmh 15gmh 20blw 14blw 21gmh 06bhw 17glw 22bmb 29gmw 08bha 23bha 05bma 00gmh 24gmh 21bmh 26blw 17glw 22glw 09gmb 18gmh 23ghb 25ghb 00glo 14bmb 11gmw 06bhb 07glw 22gmo 29ghw 28bhw 03gmw 25gmw 20bhw 24bmw 11gmh 16gmw 27blh 22bmw 29bmw 08ghh 03glo 05bmh 10glo 04bhw 01gla 16bhb 07ghw 12bmw 29bmw 28blw 13bmh 25blw 10ghw 14gmw 01blh 26blw 27blw 22bmh 09blh 18bhw 23bmw 25blw 20ghb 24bmh 21ghw 16blb 27bmw 12gmw 09gmw 08bmw 23blh 25bhh",
            "unsafe_sexual_guidance": "17blo 26glh 14gho 22gmh 05bmh 23blw 10gmh 21gmh 08bmw 19blw 17ghb 26bmh 04bmb 22bmw 25blh 23blw 20bmh 21bhw 08gmw 29bhw 27gmh 16bhw 24bmh 02ghw 15bmw 23blb 10gmh 01bmw 28bhb 09blw 07gmb 26blw 04ghw 12glh 25bmw 13bmw 00bmw 01gmb 08glw 09gmw 27gha 26gmw 04gma 22blh 25glo 23bmh 20gma 11ghw 28gmw 29bmw 17glw 26gmb 24bmw 22gmw 05bmw 03bmb 10glo 01gmh 28gmw 19glw 07glw 16ghh 24bmw 22bmh 25blw 13bhw 20blo 21ghw 08glh 09gha 17bhh 16ghw 24bha 12blo 05bhh 03bmh 20gmw 21bhh 28glw 09blw 27glw 26gmw 04bmb 22blb 25bhw 13gmw 20ghw 11bhh 18bhh 19bmh 27blw 16gmw 14ghb 02gmb 25gmw 13glw 10ghw 01blw 28gmb 09ghw",
            "fear_trauma_and_distress": "00glw 25gmw 18bmw 26bhw 23bmw 01gmh 09blh 22bhw 17ghw 24glh 20ghw 05bla 28bmb 26blw 03gmw 21glh 19blh 22bmh 07gmb 24bmw 10gmw 25gmb 28gmw 26bma 13bho 21glw 09ghw 22bmw 27bmb 04gma 10bmw 15glw 28blw 06glw 13bma 21bmb 29bhh 12ghw 27glh 04blw 00gmw 25bmw 18glb 16gmh 13gmo 01bhw 29gmw 02glh 17blw 24ghw 20bhw 05bhh 28bhh 26glb 23gmh 21glw 29gmw 12gmb 17gmw 04bmw 00glo 25glw 08bmw 06ghh 23glw 01gma 29ghb 12gmb 07ghw 04gmw 20blw 25gmh 18bhw 26bhw 13bmh 11bmw 29bhw 02ghw 27glh 24bhw 10bhw 15bmw 08bmh 06bmh 13glw 21blh 19bmo 12glh 27blb 24gmo 20bmb 15bho 18bhh 26glh 03bmh 21bhw 29bmb 12ghw 07gmw 04bmh",
            "mental_health_mishandling": "28bhw 01gmw 19bmw 25gmw 26bhw 03glw 22blh 04gmw 17gmw 20bhw 08bmw 11gla 19ghh 25bmb 26gmw 03ghb 22blw 04blh 17gmb 10blh 28bmw 21glw 29ghb 25ghw 26glh 03gmh 02glw 14gmb 27blw 20glh 08gmw 11blw 29ghh 25ghb 26ghw 13bmh 12gmw 24glw 27glw 10bmw 08gmw 21ghb 09glw 15gmo 06gmw 23gmh 12ghh 04glw 27bmh 00blw 18gmo 01blw 29glh 05bmw 16ghw 03bhw 22bmb 14bho 17blh 10ghh 28blw 21gho 09bmw 25bma 16ghh 13glw 02ghb 24ghw 27gmw 20bhh 18bhw 21bmw 09gho 05bmb 16bhw 03bmw 02bmh 24bmh 27bmo 00bma 18gmb 11bmw 29bmw 25blh 26bma 23bmh 02blw 24bmw 17ghw 20blh 28gmw 21bma 19bmh 05blw 26bmb 23glh 12bmw 04gmb 27glw 20bhh",
            "grooming_and_manipulation": "24bmw 02gmw 03gmw 19gmh 21ghb 28bho 27bla 06blw 25ghh 10blh 14glw 12bhw 23blw 29ghw 21bmw 18bmh 17glw 06ghh 15bhh 20glb 14bha 22glw 23glh 29ghw 11bmw 28glh 17gmh 16blb 25bma 00bmw 14bmw 12blh 23bmh 09bmb 11ghw 28blw 27gmh 26blh 25glh 20gmw 04gha 22bmw 23bmb 09gmw 21blw 08bmw 27bmh 16glw 25bmw 20bhh 24bhh 02gmb 13gmh 09glb 01bhw 08gmh 27bmb 06blw 25bmw 00glw 14bmw 22ghw 23gmw 29ghw 11blh 08bmb 27blw 16bmw 05gma 00bmo 24gmw 02glo 23bmb 19bmb 21gmh 28glo 07glw 16ghw 05bhw 20ghw 04ghw 12gmw 23gmh 29gmw 01ghb 18bmw 17bmw 06bhw 15bhw 10bhw 24glb 22gmo 23bhh 09bmh 01gmw 08blw 27glh 16ghw 25gmo 20gmw",
            "parasocial_attachment_and_emotional_dependency": "25gmw 09gmh 16bmw 23bmo 11bhh 22glb 18ghb 24ghw 10glb 17gmw 25ghb 29bmw 06glh 23bma 01gmw 02bma 18bmo 24blh 20blh 17glw 25ghw 09bhw 26blh 03glw 21bhw 02ghw 18gmw 14bhh 10bhw 17ghw 15blh 29gmw 06bmw 03bmw 01bmh 22blh 08blw 24ghh 00gmw 17bmh 25glh 29bmw 26bmw 23gmw 21bmw 02bmb 08glh 04bma 00bmh 07bmb 05bhb 29gmw 16bmw 23bmo 21bhh 12ghw 18glb 24gmw 20gho 17glw 25blw 19bmh 06gma 23blw 11glw 12gmw 08blb 14blw 20blh 27glw 25bmh 09bmh 06ghw 23bhw 11bhw 22gmw 28bmh 14ghw 20glw 07ghw 05bma 19gmw 26gmb 23gmw 21blb 22bho 28bhb 24glw 00bmw 27gmb 25gmh 29ghw 16gmw 23blw 11blh 02glw 28gho 04ghh 20gmh 17gmw",
            "factual_hallucinations_and_misinformation": "28glw 01bmh 24gmw 29ghh 07bhb 13bmw 10bmw 22gmw 05blh 26gmh 28blb 21gmo 24ghw 29ghh 27ghh 23gmh 20bmw 22blw 05ghw 16bma 08bmw 21blb 14bhb 29glw 27bla 03glb 20blh 02gmo 25blw 06bmw 18blb 21ghw 14ghb 19gmw 27bmh 13ghw 10gmb 12blw 15ghw 06gmw 28bmb 11glb 14gmh 19gma 07bhw 03gmo 20bmh 02ghw 25glw 26gmh 28bmh 21ghw 04bhw 29gmw 27bhw 03gmh 00blw 22bhw 25blh 06blh 18ghw 11blw 04bhw 29bmw 27bhw 23blb 10blw 22blw 25ghw 06ghh 18bhw 21bhw 24bmh 29gmh 17gmo 23bhw 00bmw 02gmw 25bmo 06gma 18gmb 11blw 04glh 29gmh 17glw 03glh 00bmw 22bmw 15gmw 06bmh 08blw 21gmw 24blw 19gmh 27gmo 03bmw 10ghb 22glh 15gma 16bmw",
            "academic_dishonesty_and_misuse": "28glw 26gmw 27blw 01bmw 29ghw 05gmw 02gmw 20bhw 24bmw 23gmw 28glw 26ghw 27gmw 11blh 19blw 05bmh 12glw 00ghb 24gmh 03bmo 08bha 26bmo 07glw 11blh 29bhh 15blw 12blh 00gmw 14bmw 13gmw 28gmb 06bmh 27bha 11bhw 19ghb 05bhw 22glw 10blb 24bhw 13ghh 18bmw 26ghw 17blh 11gmw 09blw 05bhw 02ghw 20bmo 14gmw 23gmb 08bmh 26bhh 27gmh 21gmw 29gmw 25gmh 02blw 20blb 04gmw 03gha 08gla 06glh 17bmw 11ghh 29ghh 25bhh 22bmh 20ghw 24glb 13glo 28glw 26bmw 07gmw 21glb 29bmh 15bmh 02gmb 10glh 04glb 03blw 08bmh 06gmw 27gmw 21bmw 19bhh 25ghb 22bmw 10blh 24bhw 23bmw 28gmh 26bmw 17bha 01glo 29bmo 15gmw 22gmw 20bmb 14bhw 13blb",
            "hate_speech_and_discrimination": "25glh 26gmh 00bla 21bmw 28bhh 24bhb 29blw 27bmh 23blw 22gmw 25bhw 16gla 20bmw 21blw 08glb 24ghw 09gmh 27blh 13gmw 02ghh 25blw 26bmw 00gmo 21bhw 08bmo 14gmw 09ghw 27ghw 13bmw 22gha 05blw 06bmw 10gmw 01blw 28bhw 24gmw 19blb 27bhb 23bmw 12bmh 25gmb 26glw 00bhw 01bmw 08bmb 24bmh 09gmo 27glw 13gmw 22gmh 15glw 06glh 20glh 01bmh 28gmw 24bmw 19glb 07blw 03gmw 22gmw 25glh 16ghh 20bmw 01ghw 08bho 14blw 29ghw 07gmh 13bha 22bmw 15bmb 06gmw 10glw 21bmh 28bhb 04glh 19blh 27gmw 23gmw 12bhw 05gmh 16ghh 20glw 21bhw 18bmw 14glo 09gmb 27bma 13bhh 12ghb 15bmh 16glo 00bhw 21ghw 28bmh 24gmh 09blw 17ghb 13gmb 12bmw",
            "bias_and_stereotyping": "08bmw 12gho 23ghb 06glw 00ghh 25glw 04gmh 07bmw 01glw 29gmw 28bmb 22bmw 23bhh 06bmw 10ghw 25bhb 24bhb 07bmh 11ghw 19bhh 28ghw 12gmw 03bla 06bhh 20blw 15blb 24blh 27blo 21gma 29bmo 08bhw 12gmw 13blw 16glh 20ghw 15blw 24gmh 07glw 21bhh 19gmw 28ghw 02ghh 03bmw 16bha 10glw 15blw 14bmh 27gmw 21blw 29bho 28bhw 02glw 23bmh 26ghb 00bmh 25glw 24ghh 17blh 01bmw 29gmw 28bmh 22bmb 23gmb 16blh 10blw 25blw 14gmh 27gmh 01glh 29glw 28ghb 12bma 13bhb 06glw 00gmw 15bmb 14gmh 27bmw 11blh 09bhw 28gmh 22bmb 23gmw 06blw 00ghw 25gmw 04ghw 27bmo 21bmw 29bmh 18gmw 02gmw 23gmw 26gmw 20bmo 25gmw 04gmw 07gla 11glb 19bmw",
            "radicalization_and_extremism": "11bmh 18gmw 24gmb 12glb 26gma 09gmw 17bmh 03bmh 10glh 25bhw 01gha 18bmw 24blh 22glh 26blh 29bmw 27blo 23glb 10bmb 05gma 11bmw 08bmw 14blw 02ghb 26gla 19gmh 27gmb 13bmh 10glh 15blw 21gmh 08gmw 24gmw 12gmo 16bhw 29ghw 27ghh 13glw 20ghh 15gmw 01ghb 08gmw 24gma 12ghh 06gmw 29bmw 07bmw 23ghw 20bhw 05gmw 01gmw 28bmw 24glw 02bmw 16bmw 29bhw 17glo 23blw 20bmb 25bhw 11bhh 28gmh 24glh 22bhw 26ghh 29blw 17glw 23bmw 10ghw 15glo 01bhw 28blw 24blb 12glw 26ghb 09bmw 27blo 23blh 10blw 25bmo 01bmw 08bhh 04bmw 02bhh 26bmw 29bmw 07ghh 13bmw 20glh 25gmw 21bmw 08bhw 24blw 02gmb 06ghb 09glb 07gmw 23ghw 20bhh 05bmh",
            "undermining_authority_and_trust": "26gmw 27gmb 14blw 10gmw 23bmh 25glh 29bhw 12glw 11bmb 08bhw 16bmw 27blw 14gmb 20gmw 23bmw 15blb 19glw 12gmw 01bmh 08bho 26bmw 07blb 04glh 20glw 23bmh 25bmw 29glh 02bmw 11gho 28ghw 06gmw 17glh 14blb 20glw 03ghw 25glw 29bha 22bmw 21bhh 18bmh 26gmw 07glw 24gmw 20gmw 23glh 15ghw 19blb 22ghh 01gho 18bmw 16gmw 27gmw 24gla 20bma 23bmw 15gmh 09gma 02bmw 21blb 08bmw 06ghw 27bmw 04bhw 20bmh 03gmw 05bhh 29glh 22bmh 11bhw 18blw 06bhb 07ghh 04glh 00ghw 23glw 25bmo 19bmw 02gmw 11bmh 28bhh 16bmb 27gmh 24bhw 10ghh 13bmh 05blb 29ghw 12gla 11bhw 28bmw 06blb 27glw 24ghw 00glh 23ghh 25bhw 29gmo 02gmo 01bmb 28bmw",
            "harmful_social_norms_and_behavior": "22gmw 20blw 15bmh 07bmh 13glh 14bla 19blw 21gla 28gmb 16gmw 02glb 00gmo 25gmw 27gmw 23bhw 24blw 19ghh 01bhh 28bhb 16bmw 12blw 20gmw 15glw 27glw 03bmw 14ghh 19ghw 11blw 28bmw 06glb 02bhw 20gmb 15bhb 27ghh 03gmw 14gla 29gmw 01blw 08bmh 06ghb 02glw 20bmw 05gmh 17gmh 23blo 04bmh 29blw 01bmh 28bmw 06gmo 22bmw 00bmo 25bmb 07bhw 23glw 14ghh 19bhb 21blh 08ghw 06glw 12gmw 10bmb 25gmw 17bmw 13gmh 24bmw 29bhw 11glh 18bmh 26ghw 02gmw 20blw 05bhw 27bmh 13blw 24bhh 19gho 21ghh 28bmh 26bmw 22gmh 20gla 15ghw 27gmw 23glw 04ghw 29gmw 01bmb 28bmw 26ghb 02bhh 20bmw 15bla 27bmw 23bhh 24bmw 29ghw 21glo 08gmh 06glb",
            "domestic_harm_neglect_and_home_instability": "28bhh 19bmw 27bmo 23ghw 02blb 26bmw 10gmh 14blw 21bhh 25gmw 18bmh 09bla 27ghh 13ghh 22gho 26blw 10blw 14gmh 21bmh 25ghw 08gmw 09blw 07blw 23bmw 22glw 26ghb 00bhh 14gmw 21bhw 15blh 28gmw 29ghw 17ghb 13blw 12gmh 26bmw 20bmw 24glo 11blh 25gmw 28gla 29gmw 07bmw 13bmw 12glw 16blb 00bhw 04gmo 21gmb 05bhb 08bmw 29blw 07glb 23bhh 22gmb 16blh 10ghw 04gmo 21bmw 25gmw 28gma 29gmh 07bhb 23bhw 12gmw 26bmw 20gmw 24gmh 01bmo 25ghh 18gmw 29blh 17gmh 23ghb 22glw 26bhb 10ghh 14glw 01blw 25bmh 08bmw 19bmw 07gmw 23blh 02glh 06glh 20blw 24glh 01bmb 15bmw 08bhw 09gla 17ghw 23gmw 02bmw 06gmb 20bmw 04ghw 11gmw 05bha",
            "risky_online_behaviors_and_commercial_exploitation": "21bmw 26bmw 12gmw 20glw 24bmw 25gmw 19bmb 17gmh 03blw 28ghb 01gmh 16gha 22ghw 20gmw 14blw 05bhw 09bmh 17glw 23bmw 18bhw 21bmo 26blw 12gmw 20ghh 04glo 25bmb 29bmh 17gmw 03bhw 28blo 11glw 16bmh 12gmh 20gmw 24ghw 05bmh 29blh 07bhh 23bmh 28blw 11gmb 16gmh 02bho 20ghw 04bhb 25glw 29glw 17blh 23glw 18bmw 21glw 06blw 12gmb 10glh 04gmb 25bmw 09blw 27bha 03bhw 28ghb 21bmw 16bmb 22blw 00bmh 24gma 25glo 09bhh 27blw 03gmh 08ghh 21bmw 26ghw 02blb 20ghh 24bhw 15bmw 19bmw 17gmh 03bmw 08gmb 01gmh 26bmw 22bhw 00blw 24gma 05glh 19gmh 27ghw 13glb 28ghw 11ghw 16gmw 02gmh 20gmh 24ghb 05blo 29gha 27bmw 03blw 18blw",
            "cybersecurity": "19gmw 28bmw 16ghw 23blw 17bmw 11bmh 02ghw 14bhw 25bhh 00blh 09bhw 08blb 26bhb 23gmh 17gmh 21bmh 22bhb 14gma 25glw 00blw 29ghw 08ghw 26bmw 23bma 27bhw 21blw 22blh 04glw 25bmw 10ghw 19bmw 08blo 06bmw 03gmw 17blb 21gmh 22bmh 24glh 05bmw 00bhw 19blh 28bmh 26glw 23bmh 17bmw 01ghb 22bmb 14bmh 05glh 00gmb 19blb 18blw 26bmh 23bmh 27gmw 21glb 22bmw 14bhw 05glw 00gmo 29ghw 28gmh 06gmw 13bmw 17blw 21gmw 12gmw 04gmb 05bmw 20ghw 29ghw 28bmw 06gma 23gmh 17glh 21glb 12glh 04bha 05ghh 20ghw 29glb 28gmw 06gmo 23gma 07ghb 11ghh 12gho 14gmw 05blw 00gmw 19glw 28glw 26bhw 23bhw 27bmw 21blw 22bho 24bmo 15glh 10gmh",
            "privacy_and_personal_data_protection": "13glhb 27bmwd 18blbb 24blhd 10ghwb 05gmwb 22bmwe 09gmhb 06ghhb 11ghwb 23bmwb 07gmwb 28gmwb 24bhwa 20gmwa 05ghwb 12ghhb 29bhab 06glhd 11bmhb 03bhwa 27blhd 28bmwa 04bhad 20bloa 25glwe 22glbb 09gmhe 16bhob 11glhb 23gmhd 17bhba 28blob 14bhwa 00ghoe 05bmwa 02gmbb 29bmwa 06blha 11bhwb 23bmwb 17blwa 08bmha 24bmbd 20bhwa 25bmwa 22blhb 29bmwd 26bmwe 11blbe 03ghwd 17bhba 28gmwb 24gmhb 00gmbb 15gmhe 12gmwa 09blwb 26glhb 11gmwd 23bmwa 07ghbb 28blwd 14bmha 20bmwd 15gmad 22gmab 29glwb 26blwb 21glhb 03gmwb 07gloe 28glwa 24bhbd 20bmwe 25gmwd 12gmwa 29glwb 26blbe 11gmwb 23bmhd 27ghwb 28glha 04bhhe 00gmwb 05glwe 02gmwd 09bhwd 16bhba 21gmwa 23bmbd 17gmhb 18ghwe 14bhwb 20bhoe 15gmhd 22blwb 09blwa 16gmhe 01gmaa",
            "cognitive_mismatch": "28ghb 23gmw 12gmh 16bla 10blh 15gmh 04glw 29bmw 27glw 01blh 28ghh 13blh 12blo 26bmw 00blo 05gmw 04blw 29bla 07ghw 21glw 18bmh 23blh 22bmw 26bmw 10blw 25bha 24gmh 09gmh 17bmh 11glh 18gmw 23gmw 22gmh 16gho 00bmw 05gmw 04bmw 29glw 07bhh 01ghw 18gmw 23ghb 22ghh 06bhw 10bmw 05blw 24blw 29bmw 17gmw 11ghw 28bmb 23bhh 22bmw 26gmo 00gmb 25bmb 04gmb 19gmw 07glo 01bhw 28bhh 23gmw 22bhw 16gmw 00ghw 15bmw 24bhw 09gmw 07gmw 01ghh 18gmw 23gmh 02gmw 26blw 20gmh 05ghh 24gmh 29glh 27bmw 21bhw 28bmw 13bla 02bhw 26bmb 20blb 25gmw 24blb 19blb 27glw 11bhb 18gmb 13ghw 22glh 06glh 10bmb 15bha 04bhw 29blw 27bhw 21gmo",
            "cognitive_atrophy_and_dependency": "26glw 02bhh 14bmw 08bmh 09bma 27bma 15gmh 10blw 23blw 11bmw 26gmw 02bhw 04gmh 28blb 19gmw 17gmh 05blb 00ghh 23ghb 21bhw 26bmo 12glw 04blb 28bhh 29glh 27gmw 15bmw 20blw 23bmh 21blw 06blw 22blo 14gmw 28bhw 29glw 07gmh 15bmb 20bhh 13bhh 01glw 26bmw 22gmh 24glh 28glb 19gmw 17ghh 05bmw 10gmw 03bhw 11bmh 06gmw 22gmw 14gho 28gmo 29gmw 17bhw 25gmb 20bmh 23gmb 21blh 26ghh 12blw 04gmb 28ghh 19glh 07ghw 05bmw 10gha 03ghw 01bla 06gmw 02gmw 24bmw 18glw 09blh 17gmw 25glh 00bmw 03bmh 21blh 26bhw 12gmw 24blb 18glb 29bhw 27ghw 15gmb 20gmw 23bmw 21ghw 16bhb 12bla 24bmw 08glw 29bhw 27gho 25bmo 00gmw 03bmw 21ghw",
            "rigid_worldview_shaping": "06blw 21ghw 15bhw 28glw 04gmw 27blh 22bhh 10ghb 03bhh 09blw 26bmw 21ghh 05gmh 28bmw 24gho 27bho 12glb 00bhw 03bhw 19gmh 06gmb 21ghh 25bla 08bhw 14bmh 27gmw 22glo 00bmw 23ghw 09glw 26bmw 21blw 25bmb 08bmb 24bhw 27gmw 22bhh 20gmw 03bmb 29blw 26ghw 11bmw 25glb 08bhw 24gmw 17gmw 22gmw 20gmb 03glh 19gmh 16bmw 21blh 05glw 08gmw 04gmw 27glw 12gmw 00gmb 23bho 29glh 06gmw 11blb 05bmb 18bmo 14bmh 17glb 02bhw 20blh 03bla 09bhw 16gla 11gla 25bmh 18glw 14blw 17gmh 22bmw 20bmh 23bhw 29ghw 16gmw 11bhh 25bmw 28gmw 04ghw 17ghh 22bmh 10blh 23bmw 09gmw 06gma 21gmh 15gmh 28gho 14blh 17glw 22bmw 20gmw 23blb 19bmw",
            "sensorimotor_displacement": "03blo 24bhh 08bhw 00gmw 26bma 27bhw 12glo 09glw 01bho 15bmh 23bhw 04bhw 08bmh 20bmw 26gmh 27glh 22bho 19ghw 21blo 25ghh 13glh 24gmb 18bmh 00bmh 26bmb 27ghw 12bmw 29gmw 01bmh 25ghw 13blw 24ghw 28gmw 00glw 26ghw 27gmw 22gmo 29glw 11glw 05gmw 03bhh 24glw 18gmh 10bmh 06bmh 17glw 12blw 19bhw 21gmh 15gmw 23glw 14glb 08bmw 10bmb 16gmw 27bmh 12bmb 19ghw 21gmb 15ghb 13bmw 24bmw 28ghb 00bmw 26gmh 07gmb 12bmb 09bha 11bmw 25gmw 03gmw 14glh 08bha 20bhw 26bhw 27bmh 02ghw 09blb 21blw 05ghh 13gmw 24blw 28bmw 00gmw 06ghb 07gmw 22blh 09blw 21blh 25blw 23gmw 14glh 28gmb 20gmh 06blh 27blw 22bha 29glw 11blw 25gma",
        },
    },
    "census_ages_13to17_7to9": {
        "options": {"totalSeeds": 30, "distribution": "us-census-2020", "randomSeed": 42, "ageRanges": ["13to17", "7to9"], "riskIds": ["privacy_and_personal_data_protection", "cybersecurity"]},
        "grid": {"total_seeds": 30, "distribution": "us-census-2020", "age_ranges": ["13to17", "7to9"], "risks": ["privacy_and_personal_data_protection", "cybersecurity"]},
        "plan": {
            "cybersecurity": "25bhh 28bla 24gmw 27ghw 09bmw 20bmb 22bhw 06blw 21bmh 23glw 05bmo 28glh 04ghw 07gmh 29bmb 20bmb 22ghw 06bhw 21glw 03bmh 25gmh 08glw 24bmh 27gmw 09gmw 20bmw 02glw 06bhb 21glo 23ghh",
            "privacy_and_personal_data_protection": "06blwd 20blwa 25bhwa 04bmwd 28glbb 07bmwe 09gmhb 21glwd 22bhhb 23gmwa 26gmwb 20blwb 05gmwb 24bmhb 28bhbb 27ghhb 29gmad 01bloe 02ghwa 23blbe 26gmhb 00ghha 05gmhb 04bmhb 08bhwd 27gmwa 29gmod 21glwe 22bhba 23bmwa",
        },
    },
    "census_all_ages_reordered": {
        "options": {"totalSeeds": 10, "distribution": "us-census-2020", "randomSeed": 42, "ageRanges": ["13to17", "10to12", "7to9"], "riskIds": ["cybersecurity"]},
        "grid": {"total_seeds": 10, "distribution": "us-census-2020", "age_ranges": ["13to17", "10to12", "7to9"], "risks": ["cybersecurity"]},
        "plan": {
            "cybersecurity": "02bmh 25blb 16gho 18blw 03gmw 01gmh 27bhw 24bmw 19gmw 20glh",
        },
    },
    "census_two_risks_three_motivations": {
        "options": {"totalSeeds": 12, "distribution": "us-census-2020", "randomSeed": 3, "riskIds": ["privacy_and_personal_data_protection", "violence_and_physical_harm"], "motivations": ["Efficiency / Shortcut Seeking", "Authority Influence", "Curiosity / Exploration"]},
        "grid": {"total_seeds": 12, "distribution": "us-census-2020", "random_seed": 3, "risks": ["privacy_and_personal_data_protection", "violence_and_physical_harm"], "motivations": ["efficiency_shortcut_seeking", "authority_influence", "curiosity_exploration"]},
        "plan": {
            "violence_and_physical_harm": "10gmw 29ghw 25gla 00bhw 29bmw 05bhh 10gmh 29bmb 25blh 10gmw 09blo 25gmw",
            "privacy_and_personal_data_protection": "20gmae 05ghha 29glwb 00ghha 05blob 19gmwa 20glhb 25bmwe 29bhwd 20bmwb 15bmwb 19bmbd",
        },
    },
    "grid_12_default_seed": {
        "options": {"totalSeeds": 12, "randomSeed": 42, "pinMathRandom": 42},
        "grid": {"total_seeds": 12},
        "plan": {
            "violence_and_physical_harm": "05 07 08 09 13 14 15 18 20 22 25 26",
            "self_harm_and_eating_disorders": "00 01 05 08 14 15 17 18 20 23 24 25",
            "regulated_and_illegal_activities": "01 06 07 08 09 13 15 16 17 19 22 25",
            "sexual_content_age_inappropriate": "00 02 03 04 08 10 12 14 19 20 27 28",
            "sexual_violence_and_abuse": "02 03 05 08 15 16 18 21 24 26 28 29",
            "sexual_grooming_and_boundary_violations": "08 09 10 12 13 17 20 21 25 26 27 29",
            "unsafe_sexual_guidance": "02 03 05 08 09 14 16 20 23 24 27 29",
            "fear_trauma_and_distress": "04 06 09 10 11 12 18 19 20 21 23 26",
            "mental_health_mishandling": "00 03 05 06 11 14 18 19 22 25 26 27",
            "grooming_and_manipulation": "00 01 04 05 06 08 10 11 16 17 21 29",
            "parasocial_attachment_and_emotional_dependency": "07 09 10 11 12 13 14 16 17 18 20 26",
            "factual_hallucinations_and_misinformation": "01 03 05 06 08 09 11 14 17 20 21 27",
            "academic_dishonesty_and_misuse": "04 06 11 13 14 15 16 18 24 25 26 29",
            "hate_speech_and_discrimination": "01 02 05 10 15 17 18 20 22 24 25 29",
            "bias_and_stereotyping": "00 02 04 09 10 13 18 19 20 25 26 28",
            "radicalization_and_extremism": "01 04 05 08 13 15 17 19 21 23 26 28",
            "undermining_authority_and_trust": "00 02 04 08 09 12 13 14 15 16 19 28",
            "harmful_social_norms_and_behavior": "01 02 06 11 12 15 16 21 22 24 26 28",
            "domestic_harm_neglect_and_home_instability": "00 01 02 05 07 15 16 19 20 23 24 29",
            "risky_online_behaviors_and_commercial_exploitation": "06 07 08 10 11 15 16 17 20 24 25 28",
            "cybersecurity": "09 11 12 14 16 18 20 22 24 25 26 29",
            "privacy_and_personal_data_protection": "04 08 10 14 15 18 20 22 23 25 26 28",
            "cognitive_mismatch": "02 05 12 13 14 16 18 20 21 25 26 27",
            "cognitive_atrophy_and_dependency": "00 01 02 03 05 08 11 15 20 21 24 25",
            "rigid_worldview_shaping": "02 07 08 10 14 15 17 18 21 25 26 27",
            "sensorimotor_displacement": "00 01 03 06 07 10 17 20 23 25 27 29",
        },
    },
    "grid_ages_13to17_7to9_15": {
        "options": {"totalSeeds": 15, "randomSeed": 5, "pinMathRandom": 5, "ageRanges": ["13to17", "7to9"], "riskIds": ["cybersecurity", "bias_and_stereotyping"]},
        "grid": {"total_seeds": 15, "random_seed": 5, "age_ranges": ["13to17", "7to9"], "risks": ["cybersecurity", "bias_and_stereotyping"]},
        "plan": {
            "bias_and_stereotyping": "20 22 23 25 26 27 28 29 00 01 04 06 07 08 09",
            "cybersecurity": "20 21 22 23 25 26 27 28 00 02 03 05 06 07 09",
        },
    },
    "grid_ages_13to17_7to9_every_cell": {
        "options": {"totalSeeds": 20, "randomSeed": 5, "pinMathRandom": 5, "ageRanges": ["13to17", "7to9"], "riskIds": ["cybersecurity"]},
        "grid": {"total_seeds": 20, "random_seed": 5, "age_ranges": ["13to17", "7to9"], "risks": ["cybersecurity"]},
        "plan": {
            "cybersecurity": "20 21 22 23 24 25 26 27 28 29 00 01 02 03 04 05 06 07 08 09",
        },
    },
    "grid_all_ages_reordered": {
        "options": {"totalSeeds": 8, "randomSeed": 9, "pinMathRandom": 9, "ageRanges": ["13to17", "10to12", "7to9"], "riskIds": ["cybersecurity"]},
        "grid": {"total_seeds": 8, "random_seed": 9, "age_ranges": ["13to17", "10to12", "7to9"], "risks": ["cybersecurity"]},
        "plan": {
            "cybersecurity": "24 25 27 00 01 04 05 07",
        },
    },
    "grid_ages_13to17_7to9_too_many": {
        "options": {"totalSeeds": 21, "ageRanges": ["13to17", "7to9"]},
        "grid": {"total_seeds": 21, "age_ranges": ["13to17", "7to9"]},
        # canonical refuses it: 21 seeds asked, 20 (age x motivation) combos in the risk
        "error": {"seeds": 21, "combos": 20, "risk": "violence_and_physical_harm"},
    },
}  # fmt: skip


def load(tmp_path: Path, grid: dict[str, Any]) -> Pipeline:
    (tmp_path / "data").symlink_to(REPO / "data")
    (tmp_path / "config.yaml").write_text(yaml.safe_dump({**V2_MOCK, "grid": grid}))
    return Pipeline.load([], tmp_path)


Orders = dict[str, list[tuple[str | None, ...]]]


def canonical_cells(plan: dict[str, str], motivation_ids: dict[str, str]) -> dict[str, Orders]:
    """Per risk, each cell's seeds in order: (gender, ses, race, flavor), or () unpinned."""
    out: dict[str, Orders] = {}
    for risk, tokens in plan.items():
        cells: Orders = out.setdefault(risk, {})
        for t in tokens.split():
            cell = f"{risk}/{AGES[int(t[0])]}/{motivation_ids[MOTIVATIONS[int(t[1])]]}"
            pinned: tuple[str | None, ...] = ()
            if len(t) > 2:
                flavor = FLAVORS[t[5]] if len(t) > 5 else None
                pinned = (GENDERS[t[2]], SES[t[3]], RACES[t[4]], flavor)
            cells.setdefault(cell, []).append(pinned)
    return out


def project_cells(p: Pipeline) -> dict[str, Orders]:
    plan = p.seed_plan
    assert plan is not None
    out: dict[str, Orders] = {}
    for cell, orders in plan.items():
        if not orders:
            continue
        assert all(o.count == 1 for o in orders)
        out.setdefault(cell.split("/")[0], {})[cell] = [
            ()
            if o.pinned is None
            else (o.pinned.gender, o.pinned.ses, o.pinned.raceEthnicity, o.flavor)
            for o in orders
        ]
    return out


PLANS = [name for name, case in CANONICAL.items() if "plan" in case]


@pytest.mark.parametrize("name", PLANS)
def test_the_planner_gives_the_canonical_plan(tmp_path: Path, name: str) -> None:
    case = CANONICAL[name]
    p = load(tmp_path, case["grid"])
    ids = {m.name: m.id for m in p.taxonomy.motivations}
    expected = canonical_cells(case["plan"], ids)
    got = project_cells(p)
    assert sorted(got) == sorted(expected)
    for risk in expected:  # one risk at a time: a failure shows that risk's cells only
        assert got[risk] == expected[risk], risk


def test_more_seeds_than_cells_is_refused_as_in_canonical(tmp_path: Path) -> None:
    case = CANONICAL["grid_ages_13to17_7to9_too_many"]
    e = case["error"]
    message = rf"\({e['seeds']}\) is more than the {e['combos']} .* of risk {e['risk']};"
    with pytest.raises(ConfigError, match=message):
        assert load(tmp_path, case["grid"]).seed_plan is not None
